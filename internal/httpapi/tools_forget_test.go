package httpapi_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/httpapi"
)

// forgetLog is a tool.Forgetter that keeps the ids it was told to forget.
type forgetLog struct {
	mu  sync.Mutex
	ids []string
}

func (f *forgetLog) Forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, id)
}

func (f *forgetLog) forgotten() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

func TestToolUpdateAndDeleteForgetTheToolsCachedCalls(t *testing.T) {
	t.Parallel()
	calls := &forgetLog{}
	h := newHarness(t, func(_ *httpapi.Config, d *httpapi.Deps) { d.Tools.Calls = calls })
	tok := h.token("acme", "tools:write tools:read")
	kept := h.mustRegister(tok, inlineTool(t, "kept"))
	gone := h.mustRegister(tok, inlineTool(t, "gone"))

	steps := []struct {
		method, id string
		body       any
		status     int
	}{
		{"PUT", kept.ID, inlineTool(t, "kept"), http.StatusOK},
		{"PUT", kept.ID, inlineTool(t, "renamed"), http.StatusUnprocessableEntity},
		{"PUT", "tool_01JD0000000000000000000000", inlineTool(t, "kept"), http.StatusNotFound},
		{"DELETE", gone.ID, nil, http.StatusOK},
		{"DELETE", gone.ID, nil, http.StatusNotFound},
	}
	for _, s := range steps {
		if r := h.do(s.method, "/v1/tools/"+s.id, tok, s.body); r.Status != s.status {
			t.Fatalf("%s %s: %d %s, want %d", s.method, s.id, r.Status, r.Body, s.status)
		}
	}
	// Only what changed a tool forgets it.
	if diff := cmp.Diff([]string{kept.ID, gone.ID}, calls.forgotten()); diff != "" {
		t.Errorf("tools forgotten (-want +got):\n%s", diff)
	}
}
