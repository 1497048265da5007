package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/model"
)

// The providers encode their requests and read their answers themselves;
// these tests hold them to what the SDKs' own request and answer types
// made of the same ChatRequest and the same bytes (the SDK paths are kept
// here, as they were, to compare with).

// rawAnswer is what the loopback server answers, as it is.
type rawAnswer struct {
	status int
	ctype  string
	body   string
}

// seen is what the loopback server received: each request's body and
// headers.
type seen struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	uris    []string
}

// answerServer serves ans to every request on loopback, recording them.
func answerServer(t *testing.T, ans rawAnswer) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies, s.headers = append(s.bodies, b), append(s.headers, r.Header.Clone())
		s.uris = append(s.uris, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		if ans.ctype != "" {
			w.Header().Set("Content-Type", ans.ctype)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(ans.body)))
		w.WriteHeader(ans.status)
		_, _ = io.WriteString(w, ans.body)
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

// outcome is what a completion made of an answer, and what it sent.
type outcome struct {
	resp    agent.ChatResponse
	err     error
	bodies  [][]byte
	headers []http.Header
	uris    []string
}

// bothWays completes req against a server answering ans, once through
// the provider's own encoding and once through sdk (the SDK's request
// and answer types), each with a pool of its own.
func bothWays(t *testing.T, provider string, sdk func(*client) provider, req agent.ChatRequest, ans rawAnswer) (own, viaSDK outcome) {
	t.Helper()
	root := ""
	if provider == model.OpenAI {
		root = "/v1"
	}
	return bothWaysAt(t, root, provider, sdk, req, ans)
}

// bothWaysAt is bothWays with the model's base_url at root on the server.
func bothWaysAt(t *testing.T, root, provider string, sdk func(*client) provider, req agent.ChatRequest, ans rawAnswer) (own, viaSDK outcome) {
	t.Helper()
	srv, s := answerServer(t, ans)
	m := testModel(provider, &llmtest.Server{URL: srv.URL})
	m.BaseURL = srv.URL + root
	run := func(swap bool) outcome {
		c, err := NewClients(testOptions(t)).clientOf(m)
		if err != nil {
			t.Fatal(err)
		}
		if swap {
			c.call = sdk(c)
		}
		resp, err := c.Complete(context.Background(), req)
		s.mu.Lock()
		defer s.mu.Unlock()
		o := outcome{resp: resp, err: err, bodies: s.bodies, headers: s.headers, uris: s.uris}
		s.bodies, s.headers, s.uris = nil, nil, nil
		return o
	}
	return run(false), run(true)
}

// compareOutcomes fails the test where own and viaSDK differ: the
// answer, the error, and each request's headers and body (as JSON values).
func compareOutcomes(t *testing.T, own, viaSDK outcome) {
	t.Helper()
	if diff := cmp.Diff(viaSDK.resp, own.resp); diff != "" {
		t.Errorf("answer (-SDK's +own):\n%s", diff)
	}
	var le1, le2 *agent.LLMError
	switch {
	case (own.err == nil) != (viaSDK.err == nil):
		t.Errorf("error %v, through the SDK %v", own.err, viaSDK.err)
	case own.err != nil && (!errors.As(own.err, &le1) || !errors.As(viaSDK.err, &le2) || *le1 != *le2):
		t.Errorf("error %#v, through the SDK %#v", own.err, viaSDK.err)
	}
	if len(own.bodies) != len(viaSDK.bodies) {
		t.Fatalf("%d requests, through the SDK %d", len(own.bodies), len(viaSDK.bodies))
	}
	for i := range own.bodies {
		if own.uris[i] != viaSDK.uris[i] {
			t.Errorf("request %d went to %s, through the SDK to %s", i, own.uris[i], viaSDK.uris[i])
		}
		var a, b any
		if err := json.Unmarshal(own.bodies[i], &a); err != nil {
			t.Fatalf("request body %q: %v", own.bodies[i], err)
		}
		if err := json.Unmarshal(viaSDK.bodies[i], &b); err != nil {
			t.Fatalf("request body through the SDK %q: %v", viaSDK.bodies[i], err)
		}
		if diff := cmp.Diff(b, a); diff != "" {
			t.Errorf("request body (-SDK's +own):\n%s", diff)
		}
		h1, h2 := own.headers[i].Clone(), viaSDK.headers[i].Clone()
		for _, h := range []http.Header{h1, h2} {
			h.Del("Content-Length")
			// How each client names itself: the SDKs' X-Stainless-*
			// headers and User-Agent; agentplane's own OpenAI requests
			// send its User-Agent alone.
			h.Del("User-Agent")
			for k := range h {
				if strings.HasPrefix(k, "X-Stainless-") {
					delete(h, k)
				}
			}
		}
		if diff := cmp.Diff(h2, h1); diff != "" {
			t.Errorf("request headers (-SDK's +own):\n%s", diff)
		}
	}
}
