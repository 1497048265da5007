package model

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

func TestBuildDefaults(t *testing.T) {
	m, err := Build(Registration{Name: "gpt", Provider: OpenAI, BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini",
		Price: &Price{InputPerMTok: 1, OutputPerMTok: 2}})
	if err != nil {
		t.Fatal(err)
	}
	want := &Model{Name: "gpt", Provider: OpenAI, BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini",
		Auth: Auth{Type: AuthNone}, Timeout: DefaultTimeout, Price: &Price{InputPerMTok: 1, OutputPerMTok: 2, Currency: "USD"}}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("Build (-want +got):\n%s", diff)
	}
}

func TestBuildHTTP2PriorKnowledge(t *testing.T) {
	m, err := Build(Registration{Name: "vllm", Provider: OpenAI, BaseURL: "HTTP://127.0.0.1:8000/v1", Model: "m", HTTP2PriorKnowledge: true})
	if err != nil || !m.HTTP2PriorKnowledge {
		t.Fatalf("Build over http: %+v, %v", m, err)
	}
	b, _ := json.Marshal(m)
	var back Model
	if err := json.Unmarshal(b, &back); err != nil || !back.HTTP2PriorKnowledge {
		t.Errorf("JSON round trip %s: %+v, %v", b, back, err)
	}
	d, err := ServerDefault("", "http://127.0.0.1:8000/v1", "m", "", true)
	if err != nil || !d.HTTP2PriorKnowledge {
		t.Errorf("server default over http: %+v, %v", d, err)
	}
	if _, err := ServerDefault("", "https://llm.example/v1", "m", "", true); !problem.Is(err, problem.ValidationFailed) ||
		problem.As(err).Errors[0].Field != "http2_prior_knowledge" {
		t.Errorf("server default over https: %v", err)
	}
}

func TestBuildRefuses(t *testing.T) {
	ok := func() Registration {
		return Registration{Name: "gpt", Provider: OpenAI, BaseURL: "https://api.openai.com/v1", Model: "m"}
	}
	tests := []struct {
		name   string
		change func(r *Registration)
		fields []string
	}{
		{"trailing newline in the name", func(r *Registration) { r.Name = "gpt\n" }, []string{"name"}},
		{"fragment", func(r *Registration) { r.BaseURL = "https://api.openai.com/v1#x" }, []string{"base_url"}},
		{"empty query", func(r *Registration) { r.BaseURL = "https://api.openai.com/v1?" }, []string{"base_url"}},
		{"no host", func(r *Registration) { r.BaseURL = "https:///v1" }, []string{"base_url"}},
		{"zero timeout", func(r *Registration) { r.Timeout = "0s" }, []string{"timeout"}},
		{"header for bearer", func(r *Registration) { r.Auth = &Auth{Type: AuthBearer, SecretsRef: "env://K", Header: "api-key"} }, []string{"auth.header"}},
		{"secret with none", func(r *Registration) { r.Auth = &Auth{SecretsRef: "env://K"} }, []string{"auth.secrets_ref"}},
		{"the auth header as a header", func(r *Registration) {
			r.Auth = &Auth{Type: AuthAPIKey, SecretsRef: "env://K", Header: "X-Key"}
			r.Headers = map[string]string{"x-key": "v"}
		}, []string{"headers.x-key"}},
		{"header with a newline", func(r *Registration) { r.Headers = map[string]string{"X-A": "a\r\nX-B: b"} }, []string{"headers.X-A"}},
		{"Host header", func(r *Registration) { r.Headers = map[string]string{"Host": "evil"} }, []string{"headers.Host"}},
		{"model with a control character", func(r *Registration) { r.Model = "gpt\x00" }, []string{"model"}},
		{"prior knowledge over https", func(r *Registration) { r.HTTP2PriorKnowledge = true }, []string{"http2_prior_knowledge"}},
		{"lower-case currency and huge price", func(r *Registration) { r.Price = &Price{InputPerMTok: 1e9, Currency: "eur"} },
			[]string{"price.input_per_mtok", "price.currency"}},
	}
	for _, base := range []string{"ftp://models.example.com/v1", "gopher://127.0.0.1:70/_x", "file:///etc/passwd"} {
		r := ok()
		r.BaseURL = base
		if _, err := Build(r); !problem.Is(err, problem.URLNotAllowed) {
			t.Errorf("Build(base_url %s) = %v, want url-not-allowed", base, err)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ok()
			tc.change(&r)
			_, err := Build(r)
			pe := problem.As(err)
			var got []string
			for _, e := range pe.Errors {
				got = append(got, e.Field)
			}
			if pe.Code != problem.ValidationFailed || !cmp.Equal(tc.fields, got) {
				t.Errorf("Build = %v (%v), want validation-failed on %v", err, got, tc.fields)
			}
		})
	}
}

func TestModelJSON(t *testing.T) {
	m := Model{ID: "mdl_1", Tenant: "acme", Name: "gpt", Provider: OpenAI, BaseURL: "https://x/v1", Model: "m",
		Auth: Auth{Type: AuthBearer, SecretsRef: "env://K"}, Timeout: 90 * time.Second, Revision: 1,
		CreatedAt: time.Date(2026, 11, 26, 7, 0, 0, 123e6, time.UTC)}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal(b, &doc)
	if doc["timeout"] != "1m30s" || doc["tenant"] != nil || doc["Tenant"] != nil || doc["created_at"] != "2026-11-26T07:00:00.123Z" {
		t.Errorf("JSON of a model: %s", b)
	}
	var back Model
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	m.Tenant = ""
	if diff := cmp.Diff(m, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// A pointer encodes the same.
	if pb, _ := json.Marshal(&m); string(pb) != string(b) {
		t.Errorf("pointer: %s, value: %s", pb, b)
	}
}

func TestServerDefault(t *testing.T) {
	m, err := ServerDefault("", "https://api.openai.com/v1", "gpt-4o-mini", "env://OPENAI_API_KEY", false)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != DefaultName || m.ID != "mdl_default" || m.Provider != OpenAI || m.Auth != (Auth{Type: AuthBearer, SecretsRef: "env://OPENAI_API_KEY"}) {
		t.Errorf("default model: %+v", m)
	}
	a, err := ServerDefault(Anthropic, "https://api.anthropic.com", "claude-sonnet-4-5", "env://K", false)
	if err != nil || a.Auth.Type != AuthAPIKey {
		t.Errorf("anthropic default: %+v, %v", a, err)
	}
	if _, err := ServerDefault("gemini", "https://x/v1", "m", "", false); !problem.Is(err, problem.ValidationFailed) {
		t.Errorf("unknown provider: %v", err)
	}
}

// memStore is a Store in a map, for the Service and Lookup.
type memStore struct{ models map[string]*Model }

func (s *memStore) key(tenant, name string) string { return tenant + "/" + name }

func (s *memStore) CreateModel(_ context.Context, m *Model, _ *audit.Record) error {
	if s.models[s.key(m.Tenant, m.Name)] != nil {
		return problem.New(problem.Conflict, "taken")
	}
	s.models[s.key(m.Tenant, m.Name)] = m
	return nil
}

func (s *memStore) UpdateModel(_ context.Context, m *Model, _ *audit.Record) error {
	s.models[s.key(m.Tenant, m.Name)] = m
	return nil
}

func (s *memStore) DeleteModel(_ context.Context, tenant, name string, _ *audit.Record) error {
	delete(s.models, s.key(tenant, name))
	return nil
}

func (s *memStore) ModelByName(_ context.Context, tenant, name string) (*Model, error) {
	if m := s.models[s.key(tenant, name)]; m != nil {
		c := *m
		return &c, nil
	}
	return nil, NotFound(name)
}

func (s *memStore) ListModels(context.Context, string, ListOptions) ([]*Model, error) {
	return nil, nil
}

func TestServiceAndLookup(t *testing.T) {
	ctx := context.Background()
	st := &memStore{models: map[string]*Model{}}
	now := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
	svc := &Service{Store: st, Now: func() time.Time { return now }}
	reg := Registration{Name: "gpt", Provider: OpenAI, BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini"}
	rec := &audit.Record{}
	m, err := svc.Register(ctx, "acme", reg, rec)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Resource != (audit.Resource{Type: "model", ID: m.ID}) || m.Revision != 1 || m.Tenant != "acme" {
		t.Errorf("registered %+v, record resource %+v", m, rec.Resource)
	}

	def, _ := ServerDefault("", "https://llm.example/v1", "big", "", false)
	lookup := NewLookup(st, def)
	reg.Model = "gpt-4o"
	if _, err := svc.Update(ctx, "acme", "gpt", reg, nil); err != nil {
		t.Fatal(err)
	}
	got, err := lookup.Model(ctx, "acme", "gpt")
	if err != nil || got.Model != "gpt-4o" || got.Revision != 2 || !got.CreatedAt.Equal(now) {
		t.Errorf("lookup after update: %+v, %v", got, err)
	}
	d, err := lookup.Model(ctx, "globex", DefaultName)
	if err != nil || d.Model != "big" || d.Tenant != "globex" || def.Tenant != "" {
		t.Errorf("default for globex: %+v, %v", d, err)
	}
	if _, err := lookup.Model(ctx, "globex", "gpt"); !problem.Is(err, problem.NotFound) {
		t.Errorf("another tenant's model: %v", err)
	}
	if _, err := NewLookup(st, nil).Model(ctx, "acme", DefaultName); !problem.Is(err, problem.NotFound) {
		t.Errorf("default without --llm-*: %v", err)
	}
	reg.Name = "other"
	if _, err := svc.Update(ctx, "acme", "gpt", reg, nil); !problem.Is(err, problem.ValidationFailed) {
		t.Errorf("rename: %v", err)
	}
}
