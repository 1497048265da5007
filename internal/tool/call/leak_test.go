package call

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentplane/agentplane/internal/tool"
)

// spanExporter is the process's tracer provider for these tests, installed
// once: the package's tracer follows the first provider set.
var spanExporter = sync.OnceValue(func() *tracetest.InMemoryExporter {
	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	return exp
})

// spanText is every span's name, attributes, events and status, one span
// a line.
func spanText(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		var b strings.Builder
		b.WriteString(s.Name)
		for _, kv := range s.Attributes {
			b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
		}
		for _, ev := range s.Events {
			b.WriteString(" event " + ev.Name)
			for _, kv := range ev.Attributes {
				b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
			}
		}
		b.WriteString(" status " + s.Status.Code.String() + " " + s.Status.Description)
		out = append(out, b.String())
	}
	return out
}

// errorText is the text of err and of every error it wraps.
func errorText(err error) string {
	var b strings.Builder
	for queue := []error{err}; len(queue) > 0; queue = queue[1:] {
		e := queue[0]
		if e == nil {
			continue
		}
		b.WriteString(e.Error() + "\n")
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			queue = append(queue, u.Unwrap())
		case interface{ Unwrap() []error }:
			queue = append(queue, u.Unwrap()...)
		}
	}
	return b.String()
}

// closedURL is the URL of a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

// TestCallCredentialsStayOutOfTracesLogsAndRecords calls tools with every
// kind of credential, on success and failure, and looks for the credentials
// in everything the call leaves behind: spans, log lines, the error, the
// recorded request and the audit record.
func TestCallCredentialsStayOutOfTracesLogsAndRecords(t *testing.T) {
	exp := spanExporter()
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		_, _ = w.Write([]byte(`{"ok": true}`))
	})
	failing := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	tokens := newTokenServer(t, "json-client", testSecret)
	// A token endpoint that fails and echoes what it was sent.
	echoing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": "server_error", "authorization": r.Header.Get("Authorization"), "form": r.PostForm})
	}))
	t.Cleanup(echoing.Close)
	closed := closedURL(t)
	_, get, _ := billingOps()
	mcpServer := newMCPServer(t)
	echo := &tool.Operation{ID: "echo", Kind: tool.Read, MCP: &tool.MCPBinding{Name: "echo"}}

	query := tool.Auth{Type: tool.AuthAPIKey, SecretsRef: "env://TOOL_SECRET", In: "query", Name: "key"}
	oauth := tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_OAUTH", TokenURL: tokens.URL}
	tests := []struct {
		name    string
		baseURL string
		auth    tool.Auth
		// op is the operation called, default get_customer.
		op      *tool.Operation
		wantErr bool
	}{
		{name: "api key in the query", baseURL: api.URL, auth: query},
		{name: "api key in the default header", baseURL: api.URL, auth: tool.Auth{Type: tool.AuthAPIKey, SecretsRef: "env://TOOL_SECRET"}},
		{name: "api key in a named header", baseURL: api.URL, auth: tool.Auth{Type: tool.AuthAPIKey, SecretsRef: "env://TOOL_SECRET", Header: "X-Token"}},
		{name: "bearer", baseURL: api.URL, auth: tool.Auth{Type: tool.AuthBearer, SecretsRef: "env://TOOL_SECRET"}},
		{name: "basic", baseURL: api.URL, auth: tool.Auth{Type: tool.AuthBasic, SecretsRef: "env://TOOL_BASIC"}},
		{name: "oauth2", baseURL: api.URL, auth: oauth},
		{name: "api key in the query, an error status", baseURL: failing.URL, auth: query, wantErr: true},
		{name: "api key in the query, a closed port", baseURL: closed, auth: query, wantErr: true},
		{name: "bearer, a closed port", baseURL: closed, auth: tool.Auth{Type: tool.AuthBearer, SecretsRef: "env://TOOL_SECRET"}, wantErr: true},
		{name: "oauth2, a closed port", baseURL: closed, auth: oauth, wantErr: true},
		{name: "oauth2, a token endpoint that echoes", baseURL: api.URL, wantErr: true,
			auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_OAUTH", TokenURL: echoing.URL}},
		{name: "oauth2, a closed token endpoint", baseURL: api.URL, wantErr: true,
			auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_OAUTH", TokenURL: closed}},
		{name: "mcp, api key in the query", baseURL: mcpServer.URL, auth: query, op: echo},
		{name: "mcp, bearer", baseURL: mcpServer.URL, auth: tool.Auth{Type: tool.AuthBearer, SecretsRef: "env://TOOL_SECRET"}, op: echo},
		{name: "mcp, a closed port", baseURL: closed, auth: query, op: echo, wantErr: true},
	}
	// What must appear nowhere: the secret (as key, token, client secret or
	// password), the basic credentials encoded, and the issued access tokens.
	forbidden := []string{testSecret, "alice:pa:ss", "YWxpY2U6cGE6c3M=", "access-token-"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exp.Reset()
			logs.Reset()
			audits := &memAudit{}
			ex := newExecutor(t, Options{Audit: audits, Retries: -1})
			op := get
			if tc.op != nil {
				op = tc.op
			}
			res, err := ex.Call(context.Background(), tool.CallRequest{
				Tenant:    "acme",
				Tool:      &tool.Tool{ID: "tool_leak", Name: "billing", BaseURL: tc.baseURL, Auth: tc.auth, Revision: 1},
				Operation: op,
				Args:      map[string]any{"customer_id": "c", "fields": "name"},
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want one: %t", err, tc.wantErr)
			}
			slog.Error("tool call", "err", err, "request", res.Request) // as a caller logs a call
			rec, _ := json.Marshal(res.Request)
			aud, _ := json.Marshal(audits.recs)
			spans := spanText(exp.GetSpans())
			if !strings.Contains(strings.Join(spans, "\n"), "url.full=") {
				t.Fatalf("no client span recorded a URL: the test sees nothing:\n%s", strings.Join(spans, "\n"))
			}
			places := map[string]string{
				"spans":            strings.Join(spans, "\n"),
				"logs":             logs.String(),
				"error":            errorText(err),
				"recorded request": string(rec),
				"audit records":    string(aud),
			}
			for where, text := range places {
				for _, s := range forbidden {
					if strings.Contains(text, s) {
						t.Errorf("%s carry %q:\n%s", where, s, text)
					}
				}
			}
		})
	}
	// The credentials did reach the API, where they belong.
	var sawKey, sawAuth bool
	for _, r := range api.requests() {
		sawKey = sawKey || strings.Contains(r.Query, "key="+testSecret)
		sawAuth = sawAuth || strings.HasPrefix(r.Header.Get("Authorization"), "Bearer access-token-")
	}
	if !sawKey || !sawAuth {
		t.Errorf("the API saw the query key: %t, the oauth2 token: %t", sawKey, sawAuth)
	}
	if n := mcpServer.authorized.Load(); n < 2 {
		t.Errorf("the MCP server saw credentials on %d requests, want those of both calls", n)
	}
	if n := len(failing.requests()); n != 1 || !strings.Contains(failing.requests()[0].Query, "key="+testSecret) {
		t.Errorf("the failing API got %d requests, %+v", n, failing.requests())
	}
}

// mcpServer is an MCP server with one tool, echo, that answers only
// requests carrying the test's secret as the query's key or a bearer token.
type mcpServer struct {
	*httptest.Server
	authorized atomic.Int64
}

func newMCPServer(t *testing.T) *mcpServer {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type args struct {
		CustomerID string `json:"customer_id"`
		Fields     string `json:"fields"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		return nil, in, nil
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	m := &mcpServer{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("key") != testSecret && r.Header.Get("Authorization") != "Bearer "+testSecret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		m.authorized.Add(1)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(m.Close)
	return m
}
