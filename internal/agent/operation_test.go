package agent

import (
	"testing"
)

func TestOperationVersion(t *testing.T) {
	v, err := OperationVersion("acme", `we"ird.repos/get`)
	if err != nil {
		t.Fatal(err)
	}
	def, errs := DecodeDefinition(v.Definition)
	if len(errs) > 0 {
		t.Fatalf("the definition of %s does not decode: %v\n%s", v.Ref(), errs, v.Definition)
	}
	if len(def.Tools) != 1 || def.Tools[0] != `we"ird` || len(def.Steps) != 1 || def.Steps[0].Call != `we"ird.repos/get` ||
		def.Steps[0].Action != OperationAction || def.Output != "result" {
		t.Errorf("definition: %+v", def)
	}
	for _, bad := range []string{"", "payments", ".op", "payments."} {
		if _, err := OperationVersion("acme", bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := (OperationVersions{}).AgentVersion(t.Context(), "acme", OperationAgent, ""); err == nil {
		t.Error("the default version of mcp: no error")
	}
}
