package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// models is a model.Lookup knowing some names of tenant acme.
type models []string

func (m models) Model(_ context.Context, tenant, name string) (*model.Model, error) {
	for _, n := range m {
		if tenant == "acme" && n == name {
			return &model.Model{Tenant: tenant, Name: name}, nil
		}
	}
	return nil, problem.New(problem.NotFound, "no model named %s", name)
}

// TestDeployChecksTheTenantsModels: the runner's catalog knows the models
// its lookup finds, so a deploy naming another is refused on its field.
func TestDeployChecksTheTenantsModels(t *testing.T) {
	t.Parallel()
	db := setup(t)
	tests := []struct {
		name   string
		lookup model.Lookup
		def    string
		field  string // "" when it deploys
	}{
		{name: "a registered model", lookup: models{"small"},
			def: `{"model": "small", "tools": ["ledger"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`},
		{name: "an unknown model", lookup: models{"small"},
			def:   `{"tools": ["ledger"], "steps": [{"action": "a", "plan": {"prompt": "goal", "model": "large"}}]}`,
			field: "definition.steps[0].plan.model"},
		{name: "no default model", lookup: models{"small"},
			def:   `{"tools": ["ledger"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`,
			field: "definition.steps[0].plan.model"},
		{name: "the default model", lookup: models{"default"},
			def: `{"tools": ["ledger"], "steps": [{"action": "a", "plan": {"prompt": "goal"}}]}`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Models: tc.lookup})
			_, err := agent.NewVersion(context.Background(), r, "acme",
				agent.Deployment{Name: fmt.Sprintf("llm-%d", i), Definition: json.RawMessage(tc.def)}, time.Now())
			var got string
			if pe, ok := err.(*problem.Error); ok && len(pe.Errors) > 0 {
				got = pe.Errors[0].Field
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.field, got); diff != "" {
				t.Errorf("refused field (-want +got):\n%s", diff)
			}
		})
	}
}
