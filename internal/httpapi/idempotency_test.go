package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/idempotency"
)

func TestIdempotentRepeatReturnsTheStoredResponse(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "audit:read")
	first := h.do("POST", "/v1/audit/query", tok, `{"action": "audit.query"}`, "Idempotency-Key", "k1")
	if first.Status != 200 || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v", first.Status, first.Header)
	}
	// Key order and spacing do not change the fingerprint.
	again := h.do("POST", "/v1/audit/query", tok, `{ "action" :"audit.query" }`, "Idempotency-Key", "k1")
	if again.Status != 200 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
		t.Fatalf("repeat: %d %v\n%s\nwant %s", again.Status, again.Header, again.Body, first.Body)
	}

	other := h.do("POST", "/v1/audit/query", tok, `{"action": "tool.create"}`, "Idempotency-Key", "k1")
	if other.Status != 422 || other.problem(t).Code != "idempotency-key-reused" {
		t.Fatalf("different body: %d %s", other.Status, other.Body)
	}

	// Another principal of the same tenant has its own keys.
	bob, err := h.Issuer.Mint(t.Context(), mint("acme", "bob", "audit:read"))
	if err != nil {
		t.Fatal(err)
	}
	r := h.do("POST", "/v1/audit/query", bob, `{"action": "tool.create"}`, "Idempotency-Key", "k1")
	if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("bob: %d %v %s", r.Status, r.Header, r.Body)
	}
}

func TestIdempotencyKeyInUseWhileRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "audit:read")
	// A first request still running, on this or another replica.
	now := time.Now()
	body := `{"action":"x"}`
	_, created, err := h.DB.BeginIdempotent(t.Context(), idempotency.Entry{
		Key:         idempotency.Key{Tenant: "acme", Principal: "alice", Method: "POST", Path: "/v1/audit/query", Key: "busy"},
		Fingerprint: fingerprintOf(t, body), State: idempotency.Running,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), LockedUntil: now.Add(time.Minute),
	})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	r := h.do("POST", "/v1/audit/query", tok, body, "Idempotency-Key", "busy")
	if r.Status != 409 || r.problem(t).Code != "idempotency-key-in-use" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %v %s", r.Status, r.Header, r.Body)
	}
}

func TestErrorsWorthRetryingAreNotStored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	weak := h.token("acme", "tools:read")
	if r := h.do("POST", "/v1/audit/query", weak, `{}`, "Idempotency-Key", "k2"); r.Status != 403 {
		t.Fatalf("%d", r.Status)
	}
	// The same key works once the caller has the scope.
	if r := h.do("POST", "/v1/audit/query", h.token("acme", "audit:read"), `{}`, "Idempotency-Key", "k2"); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("%d %v", r.Status, r.Header)
	}
}

// TestARunningRequestKeepsItsKey: a request that runs past the key's lock
// renews it, so a repeat meanwhile is told the key is in use rather than
// running the request a second time; once it ends, the repeat gets its
// response.
func TestARunningRequestKeepsItsKey(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("testdata", "users-swagger20.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int32
	fetching, release := make(chan struct{}, 1), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		tell(fetching, struct{}{})
		<-release
		w.Write(spec)
	}))
	defer slow.Close()
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	var skew atomic.Int64
	store := &hookedStore{}
	h := newHarness(t, func(cfg *httpapi.Config, d *httpapi.Deps) {
		cfg.IdempotencyLock = 300 * time.Millisecond
		d.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	}, hookStore(store))
	tok := h.token("acme", "tools:write")
	body := `{"name": "users", "type": "openapi", "spec_url": "` + slow.URL + `/users.yaml"}`
	first := make(chan response, 1)
	go func() { first <- h.do("POST", "/v1/tools", tok, body, "Idempotency-Key", "slow") }()
	receive(t, fetching, "fetch of the document")

	// The server's clock moves past the lock the request took; a renewal
	// made since (its lock ends after the move) keeps the key.
	moved := time.Now().Add(time.Second)
	skew.Store(int64(time.Second))
	for !receive(t, store.extended, "renewal of the lock").After(moved) {
	}
	r := h.do("POST", "/v1/tools", tok, body, "Idempotency-Key", "slow")
	if r.Status != 409 || r.problem(t).Code != "idempotency-key-in-use" {
		t.Fatalf("repeat while running: %d %s", r.Status, r.Body)
	}
	releaseOnce()
	if f := <-first; f.Status != 201 {
		t.Fatalf("first: %d %s", f.Status, f.Body)
	}
	r = h.do("POST", "/v1/tools", tok, body, "Idempotency-Key", "slow")
	if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat after: %d %v %s", r.Status, r.Header, r.Body)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("the document was fetched %d times, want once", n)
	}
}
