package frontdoor

import (
	"context"
	"net/http"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
)

// Info is what the middleware chain learns about a request, filled in as it
// goes and read by the audit and logging steps once the handler returns.
type Info struct {
	RequestID string
	TraceID   string
	Principal *auth.Principal
	// ResourceID overrides the {id} path value in the audit record.
	ResourceID string
	WorkflowID string
	Details    map[string]any
	// Tenant is the tenant of a request made without a token (a signed
	// page's), for its audit record.
	Tenant string
	// SignedTools are the tools whose bodies a signed page may show.
	SignedTools []string
	// Audited is set when a handler stored the request's audit record in the
	// transaction of its mutation.
	Audited bool
	Problem *problem.Error
	// ResourceMetadata is the RFC 9728 metadata URL a 401 names (/mcp).
	ResourceMetadata string
	// Session is the console session's secret, for its CSRF token.
	Session string
	// HandlerStatus is the status the API handler of a console action
	// answered, audited in place of the 303 the browser is sent.
	HandlerStatus int
	// ProblemPage, when set, writes the request's problems in place of a
	// problem document (a page of the console, whose routes set it).
	ProblemPage func(w http.ResponseWriter, r *http.Request, pe *problem.Error, status int)
}

// AddDetail adds a detail to the request's audit record.
func (i *Info) AddDetail(k string, v any) {
	if i.Details == nil {
		i.Details = map[string]any{}
	}
	i.Details[k] = v
}

type infoKey struct{}

func WithInfo(ctx context.Context, i *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, i)
}

// InfoFrom returns the request's info; never nil inside the server.
func InfoFrom(ctx context.Context) *Info {
	if i, ok := ctx.Value(infoKey{}).(*Info); ok {
		return i
	}
	return &Info{}
}

// Principal returns the authenticated caller of a protected route.
func Principal(r *http.Request) auth.Principal {
	if p := InfoFrom(r.Context()).Principal; p != nil {
		return *p
	}
	return auth.Principal{}
}

// StatusWriter records the status and whether the response has started.
type StatusWriter struct {
	http.ResponseWriter
	Status  int
	Written int64
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.Written += int64(n)
	return n, err
}

func (w *StatusWriter) Started() bool { return w.Status != 0 }

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush supports streaming through wrappers that only know http.Flusher.
func (w *StatusWriter) Flush() {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}
