package audit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// reference is the general path: the record as JSON, without hash, through
// the RFC 8785 canonicaliser.
func reference(t *testing.T, r Record) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "hash")
	b, _ = json.Marshal(m)
	canon, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(canon)
}

func TestCanonicalMatchesTheGeneralCanonicaliser(t *testing.T) {
	base := Record{
		ID: "aud_1", Seq: 42, Time: time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC), Tenant: "acme",
		Actor: Actor{Sub: "alice", ClientID: "cli_1"}, Action: "tool.create", Resource: Resource{Type: "tool", ID: "tool_1"},
		Outcome: Success, Status: 201, RequestID: "req_1", TraceID: "4bf9", PrevHash: Genesis, Hash: "ignored",
		Details: json.RawMessage(`{"b": 1.50, "a": [true, null, "x"], "é": {"z": 1e3, "y": "\u0007"}}`),
	}
	odd := base
	odd.Tenant = "t\"\\\n\t\b\f\r\x01\x1f<>&\u2028é😀"
	odd.Actor.Sub = "bad utf8 \xff\xfe"
	odd.WorkflowID = "wf_1"
	odd.Status = -1
	empty := Record{Time: base.Time}
	for name, r := range map[string]Record{"base": base, "escapes": odd, "empty": empty} {
		t.Run(name, func(t *testing.T) {
			got, err := r.canonical()
			if err != nil {
				t.Fatal(err)
			}
			if want := reference(t, r); string(got) != want {
				t.Fatalf("canonical\n got %s\nwant %s", got, want)
			}
		})
	}
}

func BenchmarkComputeHash(b *testing.B) {
	r := Record{ID: "aud_01J", Seq: 7, Time: time.Now(), Tenant: "acme", Actor: Actor{Sub: "alice"}, Action: "workflow.step",
		Resource: Resource{Type: "workflow", ID: "wf_01J"}, Outcome: Success, RequestID: "req_01J", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		WorkflowID: "wf_01J", PrevHash: Genesis, Details: Details(map[string]any{"step": 1, "action": "fetch", "status": "ok"})}
	for b.Loop() {
		if _, err := r.ComputeHash(); err != nil {
			b.Fatal(err)
		}
	}
}
