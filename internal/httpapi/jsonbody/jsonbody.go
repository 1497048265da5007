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
