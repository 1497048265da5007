package workflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

func TestStartValidatesTheInvocation(t *testing.T) {
	t.Parallel()
	db := setup(t)
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: &ledger{}, Lease: time.Minute,
		DefaultToolCalls: 7, MaxToolCalls: 10})
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	tests := []struct {
		name string
		edit func(*workflow.StartRequest)
		want []problem.FieldError
	}{
		{name: "no goal", edit: func(req *workflow.StartRequest) { req.Goal = "" },
			want: []problem.FieldError{{Field: "goal", Message: "is required: 1 to 8000 characters"}}},
		{name: "goal too long", edit: func(req *workflow.StartRequest) { req.Goal = strings.Repeat("é", 8001) },
			want: []problem.FieldError{{Field: "goal", Message: "is required: 1 to 8000 characters"}}},
		{name: "max_tool_calls 0", edit: func(req *workflow.StartRequest) { req.MaxToolCalls = new(0) },
			want: []problem.FieldError{{Field: "max_tool_calls", Message: "must be from 1 to 10"}}},
		{name: "max_tool_calls over the runner's bound", edit: func(req *workflow.StartRequest) { req.MaxToolCalls = new(11) },
			want: []problem.FieldError{{Field: "max_tool_calls", Message: "must be from 1 to 10"}}},
		{name: "checked before the agent is looked up", edit: func(req *workflow.StartRequest) { req.Agent, req.Goal = "nobody", "" },
			want: []problem.FieldError{{Field: "goal", Message: "is required: 1 to 8000 characters"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := request("settle")
			tc.edit(&req)
			_, err := r.Start(context.Background(), req)
			pe := problem.As(err)
			if pe.Code != problem.ValidationFailed {
				t.Fatalf("Start error = %v, want validation-failed", err)
			}
			if diff := cmp.Diff(tc.want, pe.Errors); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("bounds", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			max  *int
			want int
		}{
			{"the runner's default when unset", nil, 7},
			{"the invocation's own", new(10), 10},
		} {
			req := request("settle")
			req.Goal, req.MaxToolCalls = strings.Repeat("é", 8000), tc.max
			wf, err := r.Start(context.Background(), req)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if wf.MaxToolCalls != tc.want {
				t.Errorf("%s: max_tool_calls = %d, want %d", tc.name, wf.MaxToolCalls, tc.want)
			}
			if _, err := r.Wait(context.Background(), "acme", wf.ID); err != nil {
				t.Fatal(err)
			}
		}
	})
}
