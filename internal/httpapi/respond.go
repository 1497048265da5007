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

	"github.com/agentplane/agentplane/internal/httpapi/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/web"
)

// handlerFunc is an HTTP handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// writeJSON writes v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := marshal(v)
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
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeProblem writes err as an RFC 9457 problem document. It is the only
// place error responses are written.
func writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	pe := problem.As(err)
	info := infoFrom(r.Context())
	doc := pe.Doc(r.URL.Path, info.requestID, info.traceID)
	info.problem = pe
	if info.route != nil && info.route.console {
		writeConsoleProblem(w, r, pe, doc.Status)
		return
	}
	var link *refusedLink
	if errors.As(err, &link) && acceptsHTML(r) {
		web.PageHeaders(w.Header())
		w.WriteHeader(doc.Status)
		web.RenderRefusedLink(w, link.kind, link.id, errors.Is(err, web.ErrLinkExpired))
		return
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
		if info.resourceMetadata != "" {
			h.Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s"`, info.resourceMetadata))
		} else {
			h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		}
	case problem.InsufficientScope:
		h.Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s"`, pe.Scope))
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	b, _ := marshal(doc)
	w.WriteHeader(doc.Status)
	w.Write(b)
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
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return jsonbody.Decode(body, v)
}

// readBody reads the whole request body; a body over the limit is
// payload-too-large.
func readBody(r *http.Request) ([]byte, error) {
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

// requireJSON refuses bodies that are not declared as JSON.
func requireJSON(r *http.Request) error {
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

// refusedLink is a signed page's link refused (expired or badly signed):
// a 404 problem for a program, a page saying how to get a fresh link for a
// person whose browser followed it.
type refusedLink struct {
	kind, id string
	err      error
}

func (e *refusedLink) Error() string { return e.err.Error() }
func (e *refusedLink) Unwrap() error { return e.err }

// acceptsHTML reports whether the client asks for HTML (a browser does).
func acceptsHTML(r *http.Request) bool {
	for _, a := range r.Header.Values("Accept") {
		if strings.Contains(a, "text/html") {
			return true
		}
	}
	return false
}
