package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentplane/agentplane/internal/webhook"
)

func TestWebhooksAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", "agents:write agents:invoke workflows:read webhooks:write webhooks:read audit:read")
	def := json.RawMessage(`{"tools": [], "steps": [{"action": "a", "set": {"v": "1"}}], "outcome": "'swept'"}`)
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "sweep", "definition": def}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	var (
		mu     sync.Mutex
		secret string
		got    []string
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil {
			t.Errorf("verify: %v", err)
			w.WriteHeader(400)
			return
		}
		got = append(got, string(body))
	}))
	t.Cleanup(rcv.Close)

	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"no url", map[string]any{"events": []string{"workflow.completed"}}, "url"},
		{"no events", map[string]any{"url": rcv.URL}, "events"},
		{"an unknown event", map[string]any{"url": rcv.URL, "events": []string{"workflow.exploded"}}, "events[0]"},
		{"an unknown agent", map[string]any{"url": rcv.URL, "events": []string{"workflow.completed"}, "agent": "nobody"}, "agent"},
	} {
		r := h.do("POST", "/v1/webhooks", admin, tc.body)
		doc := r.problem(t)
		if r.Status != 422 || len(doc.Errors) != 1 || doc.Errors[0].Field != tc.field {
			t.Errorf("%s: %d %s; want 422 naming %s", tc.name, r.Status, r.Body, tc.field)
		}
	}

	r := h.do("POST", "/v1/webhooks", admin, map[string]any{"url": rcv.URL, "events": []string{"workflow.completed", "workflow.failed"}, "agent": "sweep"})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var created struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	r.json(t, &created)
	if !strings.HasPrefix(created.Secret, "whsec_") || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create answered %s", r.Body)
	}
	mu.Lock()
	secret = created.Secret
	mu.Unlock()
	if r := h.do("GET", "/v1/webhooks/"+created.ID, admin, nil); r.Status != 200 || strings.Contains(string(r.Body), "whsec_") {
		t.Errorf("GET shows the secret or fails: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/webhooks", admin, nil); r.Status != 200 || strings.Contains(string(r.Body), "whsec_") {
		t.Errorf("list shows the secret or fails: %d %s", r.Status, r.Body)
	}

	r = h.do("POST", "/v1/agents/sweep/invoke", admin, map[string]any{"goal": "sweep"})
	if r.Status != 200 {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	d := &webhook.Deliverer{Store: h.DB, Webhooks: h.DB, HTTP: http.DefaultClient, Timeout: time.Second}
	if n, err := d.RunOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("deliverer sent %d, %v", n, err)
	}
	mu.Lock()
	if len(got) != 1 || !strings.Contains(got[0], `"type":"workflow.completed"`) {
		t.Errorf("received %q", got)
	}
	mu.Unlock()

	r = h.do("GET", "/v1/webhooks/"+created.ID+"/deliveries?status=delivered", admin, nil)
	var list struct {
		Deliveries []struct {
			ID         string `json:"id"`
			Status     string `json:"status"`
			Attempts   int    `json:"attempts"`
			StatusCode int    `json:"last_status_code"`
		} `json:"deliveries"`
	}
	r.json(t, &list)
	if r.Status != 200 || len(list.Deliveries) != 1 || list.Deliveries[0].Attempts != 1 || list.Deliveries[0].StatusCode != 200 {
		t.Fatalf("deliveries: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/webhooks/"+created.ID+"/deliveries?status=lost", admin, nil); r.Status != 422 {
		t.Errorf("an unknown status: %d", r.Status)
	}

	// Rotate: the next attempt carries both signatures; each verifies.
	r = h.do("POST", "/v1/webhooks/"+created.ID+"/rotate-secret", admin, nil)
	var rotated struct {
		Secret string `json:"secret"`
	}
	r.json(t, &rotated)
	if r.Status != 200 || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == created.Secret {
		t.Fatalf("rotate: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/webhooks/"+created.ID+"/deliveries/"+list.Deliveries[0].ID+"/retry", admin, nil); r.Status != 200 {
		t.Fatalf("retry: %d %s", r.Status, r.Body)
	}
	for _, s := range []string{created.Secret, rotated.Secret} {
		mu.Lock()
		secret = s
		mu.Unlock()
		if n, err := d.RunOnce(t.Context()); err != nil || n != 1 {
			t.Fatalf("resend: %d, %v", n, err)
		}
		if r := h.do("POST", "/v1/webhooks/"+created.ID+"/deliveries/"+list.Deliveries[0].ID+"/retry", admin, nil); r.Status != 200 {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
	}
	mu.Lock()
	if len(got) != 3 || got[1] != got[0] || got[2] != got[0] {
		t.Errorf("a resent delivery differs: %q", got)
	}
	mu.Unlock()

	// No audit record holds a secret.
	r = h.do("GET", "/v1/audit/query?resource_type=webhook", admin, nil)
	if r.Status != 200 || strings.Contains(string(r.Body), "whsec_") || !strings.Contains(string(r.Body), "webhook.rotate_secret") {
		t.Errorf("audit: %d %s", r.Status, r.Body)
	}
	if r := h.do("DELETE", "/v1/webhooks/"+created.ID, admin, nil); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/webhooks/"+created.ID+"/deliveries", admin, nil); r.Status != 404 {
		t.Errorf("deliveries of a deleted webhook: %d", r.Status)
	}
}
