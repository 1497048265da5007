package a2atool_test

import (
	"testing"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/a2atool"
)

func TestImportCards(t *testing.T) {
	spec, err := a2atool.Importer{}.Import(t.Context(), tool.Source{Data: []byte(`{"name": "a",
	  "supportedInterfaces": [{"url": "https://a.example/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
	    {"url": "https://a.example/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
	  "skills": [{"id": "s1", "name": "Skill one"}, {"id": "s2", "description": "Second skill.\nMore."}, {"id": "s1"}, {"name": "no id"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if spec.BaseURL != "https://a.example/rpc" || len(spec.Operations) != 2 || len(spec.Warnings) != 2 {
		t.Fatalf("spec: %+v", spec)
	}
	if op := spec.Operations[1]; op.ID != "s2" || op.Kind != tool.Write || op.Summary != "Second skill." || op.A2A.Skill != "s2" {
		t.Errorf("operation: %+v", op)
	}
	for name, card := range map[string]string{
		"a 0.3 card":     `{"name": "a", "protocolVersion": "0.3.0", "url": "https://a.example/rpc", "skills": [{"id": "s"}]}`,
		"no JSONRPC 1.0": `{"name": "a", "supportedInterfaces": [{"url": "https://a.example", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}], "skills": [{"id": "s"}]}`,
		"no skill":       `{"name": "a", "supportedInterfaces": [{"url": "https://a.example", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}], "skills": []}`,
		"not a card":     `[1, 2]`,
	} {
		if _, err := (a2atool.Importer{}).Import(t.Context(), tool.Source{Data: []byte(card)}); !problem.Is(err, problem.SpecInvalid) {
			t.Errorf("%s: %v, want spec-invalid", name, err)
		}
	}
}
