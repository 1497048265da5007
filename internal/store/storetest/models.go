package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
)

func newModel(tenant, name string) *model.Model {
	return &model.Model{
		ID: ids.New(ids.Model), Tenant: tenant, Name: name, Provider: model.OpenAI,
		BaseURL: "https://example.openai.azure.com/openai/v1", Model: "gpt-4o-mini",
		Auth:    model.Auth{Type: model.AuthAPIKey, SecretsRef: "env://AZURE_OPENAI_KEY", Header: "api-key"},
		Headers: map[string]string{"X-Team": "payments"}, Timeout: 90*time.Second + 500*time.Millisecond,
		MaxConcurrency: 8, Price: &model.Price{InputPerMTok: 0.15, OutputPerMTok: 0.6, Currency: "USD"},
		DailyTokenBudget: 2_000_000, Revision: 1, CreatedAt: base, UpdatedAt: base,
	}
}

func testModelCRUD(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	want := newModel("acme", "gpt-small")
	must(t, s.CreateModel(ctx, want, record("acme", "model.create", 1)), "create")
	got, err := s.ModelByName(ctx, "acme", "gpt-small")
	must(t, err, "model by name")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ModelByName (-want +got):\n%s", diff)
	}

	// The bare minimum round-trips as it is: no headers, no price.
	bare := &model.Model{ID: ids.New(ids.Model), Tenant: "acme", Name: "local", Provider: model.Anthropic,
		BaseURL: "http://127.0.0.1:11434/v1", Model: "llama3", Auth: model.Auth{Type: model.AuthNone},
		Timeout: model.DefaultTimeout, Revision: 1, CreatedAt: base, UpdatedAt: base}
	must(t, s.CreateModel(ctx, bare, nil), "create bare")
	got, err = s.ModelByName(ctx, "acme", "local")
	must(t, err, "bare by name")
	if diff := cmp.Diff(bare, got); diff != "" {
		t.Errorf("bare model (-want +got):\n%s", diff)
	}

	upd := *want
	upd.Model, upd.Price, upd.Headers, upd.Revision = "gpt-4o", nil, nil, 2
	upd.BaseURL, upd.HTTP2PriorKnowledge = "http://10.0.0.7:8000/v1", true
	upd.UpdatedAt = base.Add(time.Minute)
	must(t, s.UpdateModel(ctx, &upd, record("acme", "model.update", 2)), "update")
	got, err = s.ModelByName(ctx, "acme", "gpt-small")
	must(t, err, "model after update")
	if diff := cmp.Diff(&upd, got); diff != "" {
		t.Errorf("updated model (-want +got):\n%s", diff)
	}
	stale := upd
	stale.Model = "gpt-4.1"
	wantCode(t, s.UpdateModel(ctx, &stale, nil), problem.Conflict, "an update from the revision before the last")
	ghost := newModel("acme", "ghost")
	wantCode(t, s.UpdateModel(ctx, ghost, nil), problem.NotFound, "update a model never created")

	must(t, s.DeleteModel(ctx, "acme", "gpt-small", record("acme", "model.delete", 3)), "delete")
	_, err = s.ModelByName(ctx, "acme", "gpt-small")
	wantCode(t, err, problem.NotFound, "model after delete")
	wantCode(t, s.DeleteModel(ctx, "acme", "gpt-small", nil), problem.NotFound, "delete twice")

	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "audit query")
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action)
	}
	slices.Sort(actions)
	if diff := cmp.Diff([]string{"model.create", "model.delete", "model.update"}, actions); diff != "" {
		t.Errorf("audit actions written with the changes (-want +got):\n%s", diff)
	}
}

func testModelNameConflict(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	must(t, s.CreateModel(ctx, newModel("acme", "gpt"), nil), "create")
	wantCode(t, s.CreateModel(ctx, newModel("acme", "gpt"), record("acme", "model.create", 1)), problem.Conflict, "same name")
	must(t, s.CreateModel(ctx, newModel("globex", "gpt"), nil), "same name in another tenant")
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "audit query")
	if len(recs) != 0 {
		t.Errorf("a refused create wrote %d audit records", len(recs))
	}
}

func testModelTenantIsolation(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	m := newModel("acme", "gpt")
	must(t, s.CreateModel(ctx, m, nil), "create")
	_, err := s.ModelByName(ctx, "globex", "gpt")
	wantCode(t, err, problem.NotFound, "another tenant's model")
	other := *m
	other.Tenant, other.Revision = "globex", 2
	wantCode(t, s.UpdateModel(ctx, &other, nil), problem.NotFound, "update another tenant's model")
	wantCode(t, s.DeleteModel(ctx, "globex", "gpt", nil), problem.NotFound, "delete another tenant's model")
	list, err := s.ListModels(ctx, "globex", model.ListOptions{})
	must(t, err, "list")
	if len(list) != 0 {
		t.Errorf("globex lists %d models, want 0", len(list))
	}
}

func testModelList(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	for _, name := range []string{"zeta", "alpha", "mid.1", "mid-2", "b"} {
		must(t, s.CreateModel(ctx, newModel("acme", name), nil), "create "+name)
	}
	var got []string
	after := ""
	for range 10 {
		page, err := s.ListModels(ctx, "acme", model.ListOptions{Limit: 2, After: after})
		must(t, err, "list")
		for _, m := range page {
			got = append(got, m.Name)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].Name
	}
	if diff := cmp.Diff([]string{"alpha", "b", "mid-2", "mid.1", "zeta"}, got); diff != "" {
		t.Errorf("paged names (-want +got):\n%s", diff)
	}
}

func testModelDeleteInUse(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	must(t, s.CreateModel(ctx, newModel("acme", "gpt"), nil), "create gpt")
	must(t, s.CreateModel(ctx, newModel("acme", "claude"), nil), "create claude")
	must(t, s.CreateModel(ctx, newModel("globex", "claude"), nil), "create globex's claude")
	v := newVersion("acme", "triage", "", 1)
	v.Models = []string{"gpt", "default", "gpt"}
	deploy(t, s, v, false)
	other := newVersion("globex", "triage", "", 1)
	other.Models = []string{"claude"}
	deploy(t, s, other, false)

	err := s.DeleteModel(ctx, "acme", "gpt", record("acme", "model.delete", 1))
	wantCode(t, err, problem.Conflict, "delete a model an agent version names")
	if want := `model "gpt" is used by agent "triage" version "1": archive that version first (DELETE /v1/agents/triage@1)`; problem.As(err).Detail != want {
		t.Errorf("conflict = %q, want it to say %q", err, want)
	}
	must(t, s.DeleteModel(ctx, "acme", "claude", nil), "delete a model only another tenant's agent names")
	if _, err := s.ModelByName(ctx, "acme", "gpt"); err != nil {
		t.Errorf("the model in use is still there: %v", err)
	}
}
