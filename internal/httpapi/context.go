package httpapi

import (
	"context"
	"net/http"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/web"
)

// reqInfo is what the middleware chain learns about a request, filled in as it
// goes and read by the audit and logging steps once the handler returns.
type reqInfo struct {
	requestID string
	traceID   string
	route     *route
	principal *auth.Principal
	// resourceID overrides the {id} path value in the audit record.
	resourceID string
	workflowID string
	details    map[string]any
	// tenant is the tenant of a request made without a token (a signed
	// page's), for its audit record.
	tenant string
	// signedTools are the tools whose bodies a signed page may show.
	signedTools web.Tools
	// audited is set when a handler stored the request's audit record in the
	// transaction of its mutation.
	audited bool
	problem *problem.Error
	// resourceMetadata is the RFC 9728 metadata URL a 401 names (/mcp).
	resourceMetadata string
	// session is the console session's secret, for its CSRF token.
	session string
	// handlerStatus is the status the API handler of a console action
	// answered, audited in place of the 303 the browser is sent.
	handlerStatus int
}

// addDetail adds a detail to the request's audit record.
func (i *reqInfo) addDetail(k string, v any) {
	if i.details == nil {
		i.details = map[string]any{}
	}
	i.details[k] = v
}

type infoKey struct{}

func withInfo(ctx context.Context, i *reqInfo) context.Context {
	return context.WithValue(ctx, infoKey{}, i)
}

// infoFrom returns the request's info; never nil inside the server.
func infoFrom(ctx context.Context) *reqInfo {
	if i, ok := ctx.Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// principalOf returns the authenticated caller of a protected route.
func principalOf(r *http.Request) auth.Principal {
	if p := infoFrom(r.Context()).principal; p != nil {
		return *p
	}
	return auth.Principal{}
}

// statusWriter records the status and whether the response has started.
type statusWriter struct {
	http.ResponseWriter
	status  int
	written int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.written += int64(n)
	return n, err
}

func (w *statusWriter) started() bool { return w.status != 0 }

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush supports streaming through wrappers that only know http.Flusher.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}
