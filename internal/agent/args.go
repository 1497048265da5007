package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// DecodeArgs decodes the arguments of a tool call a model or an agent
// wrote, a JSON object (null is none), as json.Unmarshal does but for
// numbers, which are json.Number: the tool receives each as it was
// written, every digit of an id past 2^53 included, where a float64 would
// send 1234567890123456789 as 1234567890123456800.
func DecodeArgs(raw []byte) (map[string]any, error) {
	var args map[string]any
	if err := decodeNumbers(raw, &args); err != nil {
		return nil, err
	}
	return args, nil
}

// decodeNumbers decodes the one JSON value raw holds into v, its numbers
// as json.Number.
func decodeNumbers(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}
