// Package jsonbody decodes request bodies strictly: one JSON value, no
// unknown fields, no trailing data, values of the right type, with a
// problem detail naming where a body goes wrong.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/agentplane/agentplane/internal/problem"
)

// Decode decodes one JSON value into v, refusing unknown fields,
// trailing data and values of the wrong type, with a detail naming where.
// Numbers in untyped values (an invoke's context) are json.Number, so they
// keep every digit when written back.
func Decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return problem.New(problem.MalformedRequest, "the request body is empty")
	}
	if !utf8.Valid(body) {
		return problem.New(problem.MalformedRequest, "the request body is not valid UTF-8 (RFC 8259 §8.1): send JSON text encoded as UTF-8")
	}
	if at := escapedNUL(body); at >= 0 {
		return problem.New(problem.MalformedRequest, "the request body holds a NUL character (\\u0000) at byte %d: no field accepts one", at)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return problem.Wrap(problem.MalformedRequest, err, "%s", describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return problem.New(problem.MalformedRequest, "the request body holds more than one JSON value")
	}
	return nil
}

func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Sprintf("expected %s, found %s", typ.Type, typ.Value)
		}
		return fmt.Sprintf("field %q must be %s, not %s", field, jsonTypeName(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON body ends too early"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "invalid JSON body"
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	}
	return kind
}

// escapedNUL returns the offset of the first \u0000 escape in a JSON text
// (not one whose backslash is itself escaped), or -1.
func escapedNUL(body []byte) int {
	from := 0
	for {
		i := bytes.Index(body[from:], []byte(`u0000`))
		if i < 0 {
			return -1
		}
		at := from + i
		slashes := 0
		for j := at - 1; j >= 0 && body[j] == '\\'; j-- {
			slashes++
		}
		if slashes%2 == 1 {
			return at - 1
		}
		from = at + 5
	}
}
