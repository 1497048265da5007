package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/workflow"
)

// ListFilter is a named workflow list filter.
type ListFilter struct {
	Name   string
	Filter workflow.ListFilter
}

// ConsoleListFilters are the workflow list filters the console offers, each
// as the first page and as a later one: every one must walk an index.
func ConsoleListFilters() []ListFilter {
	cursor := "wf_01KZZZZZZZZZZZZZZZZZZZZZZZ"
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fs := []ListFilter{
		{"newest", workflow.ListFilter{}},
		{"agent", workflow.ListFilter{Agent: "triage"}},
		{"agent and version", workflow.ListFilter{Agent: "triage", Version: "2"}},
		{"status", workflow.ListFilter{Status: workflow.Running}},
		{"outcome", workflow.ListFilter{Outcome: workflow.OutcomeTimedOut}},
		{"agent and status", workflow.ListFilter{Agent: "triage", Status: workflow.Completed}},
		{"time range", workflow.ListFilter{Since: since, Until: since.Add(24 * time.Hour)}},
		{"goal words", workflow.ListFilter{Words: []string{"refund", "customer"}}},
		{"goal words and agent", workflow.ListFilter{Agent: "triage", Words: []string{"refund"}}},
		{"a short goal word", workflow.ListFilter{Words: []string{"to"}}},
	}
	for _, f := range fs[:len(fs):len(fs)] {
		later := f.Filter
		later.Before = cursor
		fs = append(fs, ListFilter{f.Name + ", a later page", later})
	}
	return fs
}

// Planner explains its workflow list query, a line per step.
type Planner interface {
	ListWorkflowsPlan(ctx context.Context, tenant string, f workflow.ListFilter) ([]string, error)
}

// CheckListPlans fails t when the plan of one of ConsoleListFilters has a
// line holding tableScan (the engine's words for reading the whole
// workflows table), or when a filter on goal words of three or more
// characters does not name goalIndex ("" skips that check).
func CheckListPlans(t *testing.T, p Planner, tableScan func(line string) bool, goalIndex string) {
	t.Helper()
	for _, f := range ConsoleListFilters() {
		plan, err := p.ListWorkflowsPlan(t.Context(), "acme", f.Filter)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		text := strings.Join(plan, "\n")
		t.Logf("%s:\n%s", f.Name, text)
		for _, line := range plan {
			if tableScan(line) {
				t.Errorf("%s reads the whole table:\n%s", f.Name, text)
			}
		}
		long := false
		for _, w := range f.Filter.Words {
			long = long || len([]rune(w)) >= 3
		}
		if long && goalIndex != "" && !strings.Contains(text, goalIndex) {
			t.Errorf("%s does not use %s:\n%s", f.Name, goalIndex, text)
		}
	}
}
