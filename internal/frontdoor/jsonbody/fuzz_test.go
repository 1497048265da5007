package jsonbody_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// FuzzDecode feeds arbitrary bodies to the strict decoder: it must
// never panic, must refuse with malformed-request only, and whatever it
// accepts must be one JSON object without unknown fields.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"name": "payments", "type": "openapi", "spec_url": "https://x.test/o.json"}`,
		`{"name": "p", "auth": {"type": "oauth2", "secrets_ref": "env://TOOL_X"}, "side_effects": ["create"]}`,
		`{"name": 1}`, `{"nmae": "x"}`, `{"name": "a"} {"name": "b"}`, `[]`, `null`, ``, `{`, "\x00", `{"spec": "\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var reg tool.Registration
		err := jsonbody.Decode(body, &reg)
		if err != nil {
			if pe := problem.As(err); pe.Code != problem.MalformedRequest {
				t.Fatalf("refused with %q, want malformed-request: %v", pe.Code, err)
			}
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil && string(body) != "null" {
			t.Fatalf("accepted %q, which is not a JSON object", body)
		}
		known := []string{"name", "type", "spec_url", "spec", "endpoint_url", "auth", "policy_class", "side_effects", "idempotency_support"}
		for k := range obj {
			// encoding/json matches field names with Unicode case folding.
			if !slices.ContainsFunc(known, func(f string) bool { return strings.EqualFold(f, k) }) {
				t.Fatalf("accepted the unknown field %q", k)
			}
		}
	})
}
