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
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return args, nil
}
