package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/agentplane/agentplane/internal/problem"
)

// A document is decoded into a generic tree: map[string]any, []any, string,
// json.Number (JSON input), int, float64 (YAML input), bool and nil.

// parse decodes data, JSON or YAML, into a generic tree whose root is an
// object. isJSON reports whether the input was JSON, so that it can be handed
// to encoding/json again without re-encoding.
func parse(data []byte) (root map[string]any, isJSON bool, err error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) == 0 {
		return nil, false, problem.New(problem.SpecInvalid, "the document is empty")
	}
	var v any
	// A document starting with a brace is JSON; YAML flow mappings at the
	// top level are too rare to be worth a misleading second error.
	if trimmed[0] == '{' || trimmed[0] == '[' {
		v, err = decodeJSON(trimmed)
		if err != nil {
			return nil, false, problem.New(problem.SpecInvalid, "invalid JSON: %s", jsonErrorDetail(trimmed, err))
		}
		isJSON = true
	} else {
		v, err = decodeYAML(trimmed)
		if err != nil {
			return nil, false, problem.New(problem.SpecInvalid, "invalid YAML: %s", yamlErrorDetail(err))
		}
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, false, problem.New(problem.SpecInvalid, "not an OpenAPI document: the top level is %s, not an object", typeName(v))
	}
	return root, isJSON, nil
}

// decodeJSON decodes one JSON value, numbers as json.Number. The top three
// levels of objects and arrays are read member by member, so that the
// decoder, which buffers each value it decodes whole, holds one operation or
// one schema at a time rather than a copy of the whole document (half
// the memory of decoding a 4 MB document).
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeLevels(dec, 3)
	if err != nil {
		// Token's errors say less than Decode's: decode the document whole
		// for the message.
		whole := json.NewDecoder(bytes.NewReader(data))
		whole.UseNumber()
		var w any
		if werr := whole.Decode(&w); werr != nil {
			return nil, werr
		}
		return nil, err
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		rest := data[end:]
		return nil, &trailingDataError{offset: end + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n")))}
	}
	return v, nil
}

// decodeLevels decodes the next value, reading objects and arrays levels
// deep token by token and the values below them whole.
func decodeLevels(dec *json.Decoder, levels int) (any, error) {
	if levels == 0 {
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, unexpectedEOF(err)
	}
	switch tok {
	case json.Delim('{'):
		m := make(map[string]any)
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, unexpectedEOF(err)
			}
			key, ok := k.(string)
			if !ok {
				return nil, &json.SyntaxError{Offset: dec.InputOffset()}
			}
			if m[key], err = decodeLevels(dec, levels-1); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token()
		return m, unexpectedEOF(err)
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := decodeLevels(dec, levels-1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, unexpectedEOF(err)
	}
	return tok, nil
}

// unexpectedEOF reports the end of the input inside a value as
// io.ErrUnexpectedEOF, as Decode does, rather than Token's io.EOF.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// trailingDataError is data after the document's top-level value.
type trailingDataError struct{ offset int64 }

func (e *trailingDataError) Error() string { return "unexpected data after the top-level value" }

// jsonErrorDetail turns a decoding error into a message with a line and column.
func jsonErrorDetail(data []byte, err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		// Offset counts the offending byte.
		line, col := position(data, syn.Offset-1)
		return fmt.Sprintf("line %d, column %d: %s", line, col, syn.Error())
	}
	var trailing *trailingDataError
	if errors.As(err, &trailing) {
		line, col := position(data, trailing.offset)
		return fmt.Sprintf("line %d, column %d: %s", line, col, trailing.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		line, col := position(data, int64(len(data)))
		return fmt.Sprintf("line %d, column %d: unexpected end of the document", line, col)
	}
	return err.Error()
}

// position returns the 1-based line and column of a byte offset.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

func decodeYAML(data []byte) (v any, err error) {
	// yaml.v3 bounds alias expansion itself ("excessive aliasing"); the
	// recover guards against its rare panics on hostile input.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return normalizeYAML(v), nil
}

func yamlErrorDetail(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return te.Errors[0]
	}
	msg := err.Error()
	msg, _ = strings.CutPrefix(msg, "yaml: ")
	return msg
}

// normalizeYAML makes a decoded YAML value JSON-shaped: mapping keys become
// strings (YAML allows `200:` as an integer key) and timestamps strings.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeYAML(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[scalarString(k)] = normalizeYAML(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalizeYAML(e)
		}
		return x
	case time.Time:
		if x.Hour() == 0 && x.Minute() == 0 && x.Second() == 0 && x.Nanosecond() == 0 && x.Location() == time.UTC {
			return x.Format(time.DateOnly)
		}
		return x.Format(time.RFC3339Nano)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		return x
	case []byte:
		return string(x)
	}
	return v
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	}
	return fmt.Sprint(normalizeYAML(v))
}

// typeName names a generic value's JSON type for messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}
