package httpapi_test

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/openapi"
)

// TestToolScheduledRefresh: a tool registered with refresh "1h" is
// refreshed once its hour has passed; two replicas passing at the same
// time store one revision between them, which sends tool.drifted with its
// diff; the refresh is audited as the scheduler's. A refresh under an
// hour, not a duration, or on an inline tool is refused naming refresh.
func TestToolScheduledRefresh(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read webhooks:write webhooks:read audit:read")
	spec := newVersionedSpec(t, issuesA)
	for _, bad := range []map[string]any{
		{"name": "a", "type": "openapi", "spec_url": spec.URL, "refresh": "30m"},
		{"name": "b", "type": "openapi", "spec_url": spec.URL, "refresh": "daily"},
		{"name": "c", "type": "openapi", "spec_url": spec.URL, "refresh": "-2h"},
		{"name": "d", "type": "openapi", "spec": issuesA, "refresh": "24h"},
	} {
		_, r := h.register(tok, bad)
		if r.Status != 422 || len(r.problem(t).Errors) != 1 || r.problem(t).Errors[0].Field != "refresh" {
			t.Errorf("register with refresh %v: %d %s", bad["refresh"], r.Status, r.Body)
		}
	}
	tl := h.mustRegister(tok, map[string]any{"name": "issues", "type": "openapi", "spec_url": spec.URL, "refresh": "1h"})
	var got struct {
		Refresh string `json:"refresh"`
	}
	h.do("GET", "/v1/tools/"+tl.ID, tok, nil).json(t, &got)
	if got.Refresh != "1h" {
		t.Fatalf("the tool's refresh is %q, want 1h", got.Refresh)
	}
	var wh struct {
		ID string `json:"id"`
	}
	h.do("POST", "/v1/webhooks", tok, map[string]any{"url": "https://hooks.example.com/agentplane", "events": []string{"tool.drifted"}}).json(t, &wh)
	spec.set(issuesB)

	// Two replicas, their clocks at first before the hour, then after it.
	clock := time.Now().Add(59 * time.Minute)
	replica := func() *tool.Service {
		return &tool.Service{Store: h.DB, Fetcher: outbound.New(outbound.Options{AllowPrivate: true}), MaxSpecBytes: 32 << 20,
			Importers: map[string]tool.Importer{tool.OpenAPI: openapi.New()}, Now: func() time.Time { return clock }}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, b := replica(), replica()
	revisions := func() []string {
		var list struct {
			Revisions []struct {
				Status string `json:"status"`
			} `json:"revisions"`
		}
		h.do("GET", "/v1/tools/"+tl.ID+"/revisions", tok, nil).json(t, &list)
		var out []string
		for _, r := range list.Revisions {
			out = append(out, r.Status)
		}
		return out
	}
	if err := a.RefreshDue(t.Context(), quiet); err != nil {
		t.Fatal(err)
	}
	if got := revisions(); len(got) != 0 {
		t.Fatalf("before its hour the tool was refreshed: %v", got)
	}
	clock = clock.Add(2 * time.Minute)
	var wg sync.WaitGroup
	for _, s := range []*tool.Service{a, b} {
		wg.Go(func() {
			if err := s.RefreshDue(t.Context(), quiet); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := revisions(); len(got) != 1 || got[0] != "pending" {
		t.Fatalf("after its hour, two replicas stored revisions %v, want one pending", got)
	}
	// Claimed: the next pass finds nothing due until the next hour.
	if err := b.RefreshDue(t.Context(), quiet); err != nil {
		t.Fatal(err)
	}
	if got := revisions(); len(got) != 1 {
		t.Fatalf("a second pass in the same hour stored revisions %v", got)
	}

	var dl struct {
		Deliveries []struct {
			Type string `json:"type"`
		} `json:"deliveries"`
	}
	h.do("GET", "/v1/webhooks/"+wh.ID+"/deliveries", tok, nil).json(t, &dl)
	if len(dl.Deliveries) != 1 || dl.Deliveries[0].Type != "tool.drifted" {
		t.Errorf("deliveries: %+v, want one tool.drifted", dl.Deliveries)
	}

	var page auditPage
	h.do("GET", "/v1/audit/query?action=tool.refresh&resource_id="+tl.ID, tok, nil).json(t, &page)
	if len(page.Records) != 1 || page.Records[0].Actor.Sub != tool.RefreshActor.Sub {
		t.Errorf("audit of the scheduled refresh: %+v", page.Records)
	}

	// Applied, then a description changed in its wording alone: a
	// revision is stored, applied with an empty diff, and nothing drifted.
	if r := h.do("POST", "/v1/tools/"+tl.ID+"/revisions/1/apply", tok, nil); r.Status != 200 {
		t.Fatalf("apply: %d %s", r.Status, r.Body)
	}
	spec.set(strings.Replace(issuesB, `"title":"issues"`, `"title":"issues, reworded"`, 1))
	clock = clock.Add(2 * time.Hour)
	if err := a.RefreshDue(t.Context(), quiet); err != nil {
		t.Fatal(err)
	}
	if got := revisions(); len(got) != 2 || got[0] != "applied" {
		t.Fatalf("after a reworded description, revisions %v, want a second one applied", got)
	}
	h.do("GET", "/v1/webhooks/"+wh.ID+"/deliveries", tok, nil).json(t, &dl)
	if len(dl.Deliveries) != 1 {
		t.Errorf("deliveries after a reworded description: %+v, want still the one tool.drifted", dl.Deliveries)
	}
}
