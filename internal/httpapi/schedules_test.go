package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", "agents:write agents:invoke workflows:read schedules:write schedules:read")
	def := json.RawMessage(`{"tools": [], "steps": [{"action": "a", "set": {"v": "1"}}], "outcome": "'swept'"}`)
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "sweep", "definition": def}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	withInputs := json.RawMessage(`{"tools": [], "inputs": {"type": "object", "required": ["queue"], "properties": {"queue": {"type": "string"}}},
		"steps": [{"action": "a", "set": {"v": "context.queue"}}], "outcome": "'swept'"}`)
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "sweep-queue", "definition": withInputs}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}

	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"a date that never comes", map[string]any{"agent": "sweep", "cron": "0 0 30 2 *", "goal": "g"}, "cron"},
		{"too often", map[string]any{"agent": "sweep", "cron": "@every 10s", "goal": "g"}, "cron"},
		{"an unknown time zone", map[string]any{"agent": "sweep", "cron": "@daily", "timezone": "Mars/Olympus", "goal": "g"}, "timezone"},
		{"an unknown agent", map[string]any{"agent": "nobody", "cron": "@daily", "goal": "g"}, "agent"},
		{"an unknown version", map[string]any{"agent": "sweep@9", "cron": "@daily", "goal": "g"}, "agent"},
		{"an unknown overlap", map[string]any{"agent": "sweep", "cron": "@daily", "goal": "g", "overlap": "queue"}, "overlap"},
		{"no goal", map[string]any{"agent": "sweep", "cron": "@daily"}, "goal"},
		{"a context that is not an object", map[string]any{"agent": "sweep", "cron": "@daily", "goal": "g", "context": []any{1}}, "context"},
		{"a context its agent's inputs refuse", map[string]any{"agent": "sweep-queue", "cron": "@daily", "goal": "g", "context": map[string]any{"queue": 7}}, "context.queue"},
		{"a context without what its version's inputs require", map[string]any{"agent": "sweep-queue@1", "cron": "@daily", "goal": "g"}, "context.queue"},
		{"a number no double holds", map[string]any{"agent": "sweep", "cron": "@daily", "goal": "g", "context": map[string]any{"caps": []any{json.Number("1e400")}}}, "context.caps[0]"},
	} {
		r := h.do("POST", "/v1/schedules", admin, tc.body)
		doc := r.problem(t)
		if r.Status != 422 || doc.Code != problem.ValidationFailed || len(doc.Errors) != 1 || doc.Errors[0].Field != tc.field {
			t.Errorf("%s: %d %s; want 422 naming %s", tc.name, r.Status, r.Body, tc.field)
		}
	}

	r := h.do("POST", "/v1/schedules", admin, map[string]any{"agent": "sweep", "cron": "0 9 * * 1-5", "timezone": "Europe/Paris",
		"goal": "sweep the queue", "context": map[string]any{"queue": "billing"}})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var sch struct {
		ID       string         `json:"id"`
		Overlap  string         `json:"overlap"`
		Paused   bool           `json:"paused"`
		Context  map[string]any `json:"context"`
		NextDue  string         `json:"next_due_at"`
		Timezone string         `json:"timezone"`
		Creator  struct {
			Sub    string   `json:"sub"`
			Scopes []string `json:"scopes"`
		} `json:"creator"`
	}
	r.json(t, &sch)
	if r.Header.Get("Location") != "/v1/schedules/"+sch.ID || sch.Overlap != "skip" || sch.Paused || sch.NextDue == "" ||
		sch.Creator.Sub != "alice" || len(sch.Creator.Scopes) != 5 || sch.Context["queue"] != "billing" {
		t.Fatalf("created schedule = %s (Location %q)", r.Body, r.Header.Get("Location"))
	}
	reader := h.token("acme", "schedules:read")
	if r := h.do("GET", "/v1/schedules/"+sch.ID, reader, nil); r.Status != 200 || strings.Contains(string(r.Body), "last_skip") {
		t.Fatalf("get: %d %s; want no last_skip before any", r.Status, r.Body)
	}
	// A due time the scheduler skipped is shown with its reason.
	skipped := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	if _, err := h.DB.SkipDue(t.Context(), sch.ID, skipped, "validation-failed: context.region: is required", nil); err != nil {
		t.Fatal(err)
	}
	var shown struct {
		LastDue  time.Time `json:"last_due_at"`
		LastSkip struct {
			DueAt  time.Time `json:"due_at"`
			Reason string    `json:"reason"`
		} `json:"last_skip"`
	}
	h.do("GET", "/v1/schedules/"+sch.ID, reader, nil).json(t, &shown)
	if !shown.LastDue.Equal(skipped) || !shown.LastSkip.DueAt.Equal(skipped) || shown.LastSkip.Reason != "validation-failed: context.region: is required" {
		t.Errorf("after a skip: %+v", shown)
	}
	if r := h.do("GET", "/v1/schedules/"+sch.ID, h.token("other", "schedules:read"), nil); r.Status != 404 {
		t.Errorf("another tenant's schedule: %d", r.Status)
	}
	if r := h.do("POST", "/v1/schedules/"+sch.ID+"/pause", reader, nil); r.Status != 403 {
		t.Errorf("pause with schedules:read: %d", r.Status)
	}

	r = h.do("POST", "/v1/schedules/"+sch.ID+"/pause", admin, nil)
	sch.NextDue = ""
	r.json(t, &sch)
	if r.Status != 200 || !sch.Paused || sch.NextDue != "" {
		t.Errorf("pause: %d %s", r.Status, r.Body)
	}
	r = h.do("POST", "/v1/schedules/"+sch.ID+"/trigger", admin, nil)
	if r.Status != 202 {
		t.Fatalf("trigger: %d %s", r.Status, r.Body)
	}
	var wf struct {
		ID         string `json:"workflow_id"`
		ScheduleID string `json:"schedule_id"`
	}
	r.json(t, &wf)
	if wf.ScheduleID != sch.ID || r.Header.Get("Location") != "/v1/workflows/"+wf.ID {
		t.Errorf("triggered workflow = %s", r.Body)
	}
	r = h.do("GET", "/v1/workflows/"+wf.ID, admin, nil)
	var got struct {
		ScheduleID string `json:"schedule_id"`
		Caller     struct {
			Sub string `json:"sub"`
		} `json:"caller"`
	}
	r.json(t, &got)
	if got.ScheduleID != sch.ID || got.Caller.Sub != "alice" {
		t.Errorf("GET workflow = %s; want schedule_id %s", r.Body, sch.ID)
	}

	r = h.do("PUT", "/v1/schedules/"+sch.ID, admin, map[string]any{"agent": "sweep@1", "cron": "@every 2h", "goal": "again", "overlap": "allow"})
	r.json(t, &sch)
	if r.Status != 200 || sch.Overlap != "allow" || sch.Timezone != "UTC" || sch.Paused {
		t.Errorf("put: %d %s", r.Status, r.Body)
	}
	r = h.do("GET", "/v1/schedules", reader, nil)
	var list struct {
		Schedules []struct {
			ID string `json:"id"`
		} `json:"schedules"`
	}
	r.json(t, &list)
	if diff := cmp.Diff([]string{sch.ID}, []string{list.Schedules[0].ID}); diff != "" || len(list.Schedules) != 1 {
		t.Errorf("list = %s", r.Body)
	}
	if r := h.do("DELETE", "/v1/schedules/"+sch.ID, admin, nil); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/schedules/"+sch.ID, reader, nil); r.Status != 404 {
		t.Errorf("deleted schedule: %d", r.Status)
	}
}
