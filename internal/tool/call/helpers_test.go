package call

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/secrets"
)

// testSecret is the value behind env://TOOL_SECRET; tests assert it never
// appears in a recorded request, an error or an audit record.
const testSecret = "s3cret-value-9f2"

// testEnv is the environment the test resolver reads.
var testEnv = map[string]string{
	"TOOL_SECRET":        testSecret,
	"TOOL_BASIC":         "alice:pa:ss",
	"TOOL_OAUTH":         `{"client_id":"json-client","client_secret":"` + testSecret + `"}`,
	"TOOL_OAUTH_ROTATED": `{"client_id":"json-client","client_secret":"rotated-secret"}`,
	"OTHER":              "not allowed",
}

// newExecutor returns an executor allowed to reach loopback test servers.
func newExecutor(t *testing.T, opts Options) *Executor {
	t.Helper()
	policy, err := secrets.NewPolicy(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := secrets.NewResolver(secrets.Options{
		Policy: policy,
		Getenv: func(k string) (string, bool) { v, ok := testEnv[k]; return v, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Client == nil {
		opts.Client = outbound.New(outbound.Options{AllowPrivate: true})
	}
	if opts.Secrets == nil {
		opts.Secrets = res
	}
	if opts.Backoff == 0 {
		opts.Backoff = time.Millisecond
	}
	return New(opts)
}

// seen is what a test server saw of one request.
type seen struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   string
}

// recorder is a test server that keeps what it saw and answers with reply.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newRecorder(t *testing.T, reply func(w http.ResponseWriter, r *http.Request, body []byte, n int)) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(body)})
		n := len(rec.reqs)
		rec.mu.Unlock()
		reply(w, r, body, n)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) requests() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seen(nil), r.reqs...)
}

// tokenServer is an OAuth 2.0 token endpoint for the client-credentials
// grant that counts the tokens it issued.
type tokenServer struct {
	*httptest.Server
	mu     sync.Mutex
	secret string
	issued int
	scopes []string
}

func newTokenServer(t *testing.T, clientID, clientSecret string) *tokenServer {
	t.Helper()
	ts := &tokenServer{secret: clientSecret}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.PostForm.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		ts.mu.Lock()
		want := ts.secret
		ts.mu.Unlock()
		if !ok || id != clientID || secret != want {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		ts.mu.Lock()
		ts.issued++
		n := ts.issued
		ts.scopes = append(ts.scopes, r.PostForm.Get("scope"))
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": "access-token-" + strconv.Itoa(n),
			"token_type":   "Bearer",
			"expires_in":   3600,
		})
	}))
	t.Cleanup(ts.Close)
	return ts
}

// rotate makes secret the only client secret the server accepts.
func (ts *tokenServer) rotate(secret string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.secret = secret
}

func (ts *tokenServer) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.issued
}

// memAudit is an audit.Store that keeps records in memory.
type memAudit struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *memAudit) AppendAudit(_ context.Context, recs ...*audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		m.recs = append(m.recs, *r)
	}
	return nil
}

func (m *memAudit) QueryAudit(context.Context, string, audit.Filter) ([]audit.Record, error) {
	return nil, errors.New("not implemented")
}

func (m *memAudit) ScanAudit(context.Context, string, int64, int, func(audit.Record) error) (int, error) {
	return 0, errors.New("not implemented")
}

// outcome reduces a call's error to what tests compare.
type outcome struct {
	Code      problem.Code
	Fields    []problem.FieldError
	Status    int
	Retryable bool
	Msg       string
}

func outcomeOf(err error) outcome {
	var pe *problem.Error
	var ce *Error
	switch {
	case err == nil:
		return outcome{}
	case errors.As(err, &pe):
		return outcome{Code: pe.Code, Fields: pe.Errors, Msg: pe.Detail}
	case errors.As(err, &ce):
		return outcome{Status: ce.Status, Retryable: ce.Retryable, Msg: ce.Msg}
	default:
		return outcome{Msg: "unexpected: " + err.Error()}
	}
}

// jsonValue decodes JSON for comparison.
func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %q: %v", b, err)
	}
	return v
}
