package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
)

// handlerFunc is an HTTP handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// writeJSON writes v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeProblem writes err as an RFC 9457 problem document. It is the only
// place error responses are written.
func writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	pe := problem.As(err)
	info := infoFrom(r.Context())
	doc := pe.Doc(r.URL.Path, info.requestID, info.traceID)
	if info != nil {
		info.problem = pe
	}
	h := w.Header()
	if pe.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(ceilSeconds(pe.RetryAfter.Seconds())))
	}
	if len(pe.Allow) > 0 {
		h.Set("Allow", strings.Join(pe.Allow, ", "))
	}
	switch pe.Code {
	case problem.Unauthenticated:
		h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	case problem.InsufficientScope:
		h.Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s"`, pe.Scope))
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	b, _ := json.Marshal(doc)
	w.WriteHeader(doc.Status)
	w.Write(append(b, '\n'))
}

func ceilSeconds(s float64) int {
	n := int(s)
	if float64(n) < s {
		n++
	}
	if n < 1 {
		n = 1
	}
	return n
}

// decodeJSON decodes the request body strictly into v: JSON only, one value,
// no unknown fields. Size is already limited by the body-limit middleware.
func decodeJSON(r *http.Request, v any) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return problem.New(problem.PayloadTooLarge, "request body is over the %d byte limit", mbe.Limit)
		}
		return problem.Wrap(problem.MalformedRequest, err, "could not read the request body")
	}
	return DecodeStrict(body, v)
}

// DecodeStrict decodes one JSON value into v, refusing unknown fields,
// trailing data and values of the wrong type, with a detail naming where.
func DecodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return problem.New(problem.MalformedRequest, "the request body is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
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

// requireJSON refuses bodies that are not declared as JSON.
func requireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil // curl -d without -H; the body must still parse as JSON
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return problem.New(problem.UnsupportedMediaType, "Content-Type %q is not JSON; send application/json", ct)
	}
	return nil
}
