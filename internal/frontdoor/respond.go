package frontdoor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
)

// HandlerFunc is an HTTP handler that returns its error instead of writing it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Adapt turns a HandlerFunc's error into a problem response, or a log line
// when the response has already started (a stream).
func Adapt(log *slog.Logger, h HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		if sw, ok := w.(interface{ Started() bool }); ok && sw.Started() {
			log.Error("handler failed after the response began",
				"request_id", InfoFrom(r.Context()).RequestID, "err", err)
			return
		}
		WriteProblem(w, r, err)
	})
}

// WriteJSON writes v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// marshal encodes v as one line of JSON ending in a newline, without
// HTML-escaping <, > and & (responses are not embedded in HTML).
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteProblem writes err as an RFC 9457 problem document. It is the only
// place error responses are written.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	pe := problem.As(err)
	info := InfoFrom(r.Context())
	doc := pe.Doc(r.URL.Path, info.RequestID, info.TraceID)
	info.Problem = pe
	if info.ProblemPage != nil {
		info.ProblemPage(w, r, pe, doc.Status)
		return
	}
	var page PageError
	if errors.As(err, &page) && AcceptsHTML(r) {
		page.WritePage(w, doc.Status)
		return
	}
	h := w.Header()
	if pe.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(CeilSeconds(pe.RetryAfter.Seconds())))
	}
	if len(pe.Allow) > 0 {
		h.Set("Allow", strings.Join(pe.Allow, ", "))
	}
	switch pe.Code {
	case problem.Unauthenticated:
		if info.ResourceMetadata != "" {
			h.Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s"`, info.ResourceMetadata))
		} else {
			h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		}
	case problem.InsufficientScope:
		h.Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s"`, pe.Scope))
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	b, _ := Marshal(doc)
	w.WriteHeader(doc.Status)
	w.Write(b)
}

func CeilSeconds(s float64) int {
	n := int(s)
	if float64(n) < s {
		n++
	}
	if n < 1 {
		n = 1
	}
	return n
}

// DecodeJSON decodes the request body strictly into v: JSON only, one value,
// no unknown fields. Size is already limited by the body-limit middleware.
func DecodeJSON(r *http.Request, v any) error {
	if err := RequireJSON(r); err != nil {
		return err
	}
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	return jsonbody.Decode(body, v)
}

// ReadBody reads the whole request body; a body over the limit is
// payload-too-large.
func ReadBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, problem.New(problem.PayloadTooLarge, "request body is over the %d byte limit", mbe.Limit)
		}
		return nil, problem.Wrap(problem.MalformedRequest, err, "could not read the request body")
	}
	return body, nil
}

// RequireJSON refuses bodies that are not declared as JSON.
func RequireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil // no Content-Type at all; the body must still parse as JSON
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return problem.New(problem.UnsupportedMediaType, "Content-Type %q is not JSON; send application/json", ct)
	}
	return nil
}

// PageError is an error a person's browser is shown as a page of its own
// rather than as a problem document (a signed link refused), when the
// request accepts HTML. WritePage writes the whole response with status.
type PageError interface {
	error
	WritePage(w http.ResponseWriter, status int)
}

// AcceptsHTML reports whether the client asks for HTML (a browser does).
func AcceptsHTML(r *http.Request) bool {
	for _, a := range r.Header.Values("Accept") {
		if strings.Contains(a, "text/html") {
			return true
		}
	}
	return false
}
