package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/tool/call"
)

// limitedAPI is a tool API with one read, recording when each request
// arrived and finished and how many were in flight at once. Every fourth
// request takes slow, the others fast, so calls pile up unless their
// number in flight is limited. A request that finds hold set blocks until
// the test ends or its client goes.
type limitedAPI struct {
	srv      *httptest.Server
	mu       sync.Mutex
	arrived  []time.Time
	finished []time.Time
	inFlight int
	most     int
	hold     bool
	fast     time.Duration
	slow     time.Duration
	held     chan struct{} // a request is being held
	end      chan struct{}
}

const limitedSpec = `{"openapi": "3.0.3", "info": {"title": "books", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/balance": {"get": {"operationId": "getBalance", "responses": {"200": {"description": "ok"}}}}}}`

const limitedAgent = `{"tools": ["%s"], "steps": [{"action": "fetch", "call": "%[1]s.getBalance"}], "outcome": "'fetched'"}`

func newLimitedAPI(t *testing.T, fast, slow time.Duration) *limitedAPI {
	a := &limitedAPI{fast: fast, slow: slow, held: make(chan struct{}, 1), end: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			fmt.Fprintf(w, limitedSpec, "http://"+r.Host)
			return
		}
		a.mu.Lock()
		a.arrived = append(a.arrived, time.Now())
		a.inFlight++
		a.most = max(a.most, a.inFlight)
		hold := a.hold
		a.hold = false
		work := a.fast
		if len(a.arrived)%4 == 0 {
			work = a.slow
		}
		a.mu.Unlock()
		if hold {
			a.held <- struct{}{}
			select {
			case <-a.end:
			case <-r.Context().Done():
			}
		} else {
			time.Sleep(work)
		}
		a.mu.Lock()
		a.inFlight--
		a.finished = append(a.finished, time.Now())
		a.mu.Unlock()
		_, _ = w.Write([]byte(`{"balance": 1}`))
	}))
	t.Cleanup(func() {
		close(a.end)
		a.srv.Close()
	})
	return a
}

// arrivals returns a copy of the requests' arrival times, in order.
func (a *limitedAPI) arrivals() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.arrived...)
}

// twoReplicas starts two servers on one new PostgreSQL database and the
// shared Redis, returning them and a token valid on both. It skips t
// unless both test URLs are set.
func twoReplicas(t *testing.T) (a, b *child, tok string) {
	redisURL := os.Getenv("AGENTPLANE_TEST_REDIS_URL")
	if os.Getenv(postgres.TestDatabaseEnv) == "" || redisURL == "" {
		t.Skip("set " + postgres.TestDatabaseEnv + " (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) and " +
			"AGENTPLANE_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to test tool limits shared by two replicas")
	}
	dbURL := postgres.NewTestDatabase(t)
	flags := func() []string {
		return []string{"--data", t.TempDir(), "--database-url", dbURL, "--public-url", "http://agentplane.test",
			"--redis-url", redisURL, "--allow-private-networks", "--rate-limit", "100000"}
	}
	a = startChild(t, freeAddr(t), flags()...)
	b = startChild(t, freeAddr(t), flags()...)
	return a, b, pgToken(t, dbURL, "alice", "tools:write agents:write agents:invoke workflows:read tool:*")
}

// registerLimited registers api as tool name with limits and deploys an
// agent of the same name that reads it once.
func registerLimited(t *testing.T, srv *child, tok, name string, api *limitedAPI, limits map[string]any) {
	t.Helper()
	if code, body := srv.do("POST", "/v1/tools", tok, map[string]any{"name": name, "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "limits": limits}); code != 201 {
		t.Fatalf("register %s: %d %v", name, code, body)
	}
	def := json.RawMessage(fmt.Sprintf(limitedAgent, name))
	if code, body := srv.do("POST", "/v1/agents", tok, map[string]any{"name": name, "definition": def}); code != 201 {
		t.Fatalf("deploy %s: %d %v", name, code, body)
	}
}

// invoke posts an invoke of agent to srv with the Prefer header prefer ("" for none).
func invoke(srv *child, tok, agent, prefer string) (*http.Response, error) {
	req, _ := http.NewRequest("POST", srv.base+"/v1/agents/"+agent+"/invoke", strings.NewReader(`{"goal": "read"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if prefer != "" {
		req.Header.Set("Prefer", prefer)
	}
	return http.DefaultClient.Do(req)
}

// invokeAsync starts agent on srv without waiting for it and returns the
// workflow's id.
func invokeAsync(t *testing.T, srv *child, tok, agent string) string {
	t.Helper()
	resp, err := invoke(srv, tok, agent, "respond-async")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Workflow-Id") == "" {
		t.Fatalf("invoke %s: %d, want 202 with a Workflow-Id", agent, resp.StatusCode)
	}
	return resp.Header.Get("Workflow-Id")
}

// TestTwoReplicasKeepAToolsLimitsUnderLoad sends 200 concurrent workflows
// through two servers on one PostgreSQL and one Redis to a tool limited to
// 3 calls in flight and 20 a second: the tool never sees more.
func TestTwoReplicasKeepAToolsLimitsUnderLoad(t *testing.T) {
	t.Parallel()
	a, b, tok := twoReplicas(t)
	api := newLimitedAPI(t, 30*time.Millisecond, 600*time.Millisecond)
	registerLimited(t, a, tok, "books", api, map[string]any{"rate": "20/s", "concurrency": 3, "timeout": "30s"})

	const workflows = 200
	var wg sync.WaitGroup
	for i := range workflows {
		srv := []*child{a, b}[i%2]
		wg.Go(func() {
			resp, err := invoke(srv, tok, "books", "")
			if err != nil {
				t.Errorf("workflow %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			var wf map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&wf)
			if resp.StatusCode != 200 || wf["outcome"] != "fetched" {
				t.Errorf("workflow %d on %s: %d %v", i, srv.base, resp.StatusCode, wf)
			}
		})
	}
	wg.Wait()

	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.arrived) != workflows || len(api.finished) != workflows || api.most > 3 {
		t.Errorf("the tool saw %d requests (%d finished), at most %d at once; want %d, at most 3",
			len(api.arrived), len(api.finished), api.most, workflows)
	}
	// The tool sees a request some time after the limiter let it go, and
	// under -race on a loaded machine that delay varies by up to a few
	// hundred milliseconds: a window of 800 ms holds at most the 21 a
	// second allows (+1 for the edges) whatever the delays up to 200 ms,
	// while two replicas each keeping 20/s would put about 32 in it.
	for i := range api.arrived {
		n := 0
		for j := i; j < len(api.arrived) && api.arrived[j].Sub(api.arrived[i]) < 800*time.Millisecond; j++ {
			n++
		}
		if n > 21 {
			t.Fatalf("%d requests arrived within 800 ms of request %d: over 20/s (+1 for the edges)", n, i)
		}
	}
}

// TestAKilledReplicasSlotIsFreedWithinItsLease kills (SIGKILL) a replica
// whose call holds the only slot of a tool limited to one call in flight:
// the other replica's call, waiting meanwhile, reaches the tool once the
// dead replica's lease on the slot has run out, not before the kill.
func TestAKilledReplicasSlotIsFreedWithinItsLease(t *testing.T) {
	t.Parallel()
	a, b, tok := twoReplicas(t)
	api := newLimitedAPI(t, 0, 0)
	api.hold = true
	registerLimited(t, a, tok, "gate", api, map[string]any{"concurrency": 1, "timeout": "30s"})

	invokeAsync(t, a, tok, "gate")
	select {
	case <-api.held:
	case <-time.After(20 * time.Second):
		t.Fatal("replica a's call never reached the tool")
	}
	second := invokeAsync(t, b, tok, "gate")
	if n := len(api.arrivals()); n != 1 {
		t.Fatalf("the tool saw %d requests while replica a held the only slot, want 1", n)
	}

	a.kill()
	killed := time.Now()
	const margin = 3 * time.Second
	limit := call.DefaultSlotLease + margin
	var got []time.Time
	for time.Since(killed) < limit {
		if got = api.arrivals(); len(got) > 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) < 2 {
		t.Fatalf("replica b's call did not reach the tool within %v of the kill (slot lease %v)", limit, call.DefaultSlotLease)
	}
	t.Logf("replica b's call reached the tool %v after the kill (slot lease %v)", got[1].Sub(killed).Round(time.Millisecond), call.DefaultSlotLease)
	// The dead replica renewed its slot at most a third of the lease before
	// the kill: b's call, waiting since before it, cannot have the slot
	// sooner than the rest of that lease.
	if waited := got[1].Sub(killed); waited < call.DefaultSlotLease/2 {
		t.Errorf("replica b's call reached the tool %v after the kill, before the dead replica's lease (%v) ran out", waited, call.DefaultSlotLease)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, wf := b.do("GET", "/v1/workflows/"+second, tok, nil)
		if wf["status"] != "running" {
			if wf["status"] != "completed" || wf["outcome"] != "fetched" {
				t.Errorf("replica b's workflow: %v", wf)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica b's workflow still running 10 s after its call got the slot: %v", wf)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
