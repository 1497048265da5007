package siem

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
)

func loadFacts(t *testing.T, version string) *SchemaFacts {
	t.Helper()
	f, err := LoadSchemaFacts("testdata/ocsf-" + version + ".json")
	if err != nil {
		t.Fatalf("schema facts of the version the export names: %v", err)
	}
	if f.Version != version {
		t.Fatalf("facts are of OCSF %s, the export names %s", f.Version, version)
	}
	return f
}

// sealed returns records as a chain seals them.
func sealed(t *testing.T, recs ...audit.Record) []audit.Record {
	t.Helper()
	prev := audit.Genesis
	for i := range recs {
		audit.Prepare(time.Now, &recs[i])
		if err := recs[i].Seal(int64(i+1), prev); err != nil {
			t.Fatal(err)
		}
		prev = recs[i].Hash
	}
	return recs
}

func TestEventsHaveTheSchemasRequiredAttributes(t *testing.T) {
	for _, v := range OCSFVersions {
		t.Run(v, func(t *testing.T) { testEventsOf(t, v) })
	}
}

func testEventsOf(t *testing.T, version string) {
	facts := loadFacts(t, version)
	at := time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)
	recs := sealed(t,
		audit.Record{Time: at, Tenant: "acme", Actor: audit.Actor{ClientID: "cli_1"}, Action: "oauth.token",
			Resource: audit.Resource{Type: "client", ID: "cli_1"}, Outcome: audit.Success, Status: 200, RequestID: "req_1",
			Details: audit.Details(map[string]any{"method": "POST"})},
		audit.Record{Time: at, Tenant: audit.SystemTenant, Action: "oauth.token", Resource: audit.Resource{Type: "client"},
			Outcome: audit.Denied, Status: 401, RequestID: "req_2", Details: audit.Details(map[string]any{"method": "POST"})},
		audit.Record{Time: at, Tenant: "acme", Actor: audit.Actor{Sub: "alice", ClientID: "cli_1"}, Action: "tool.create",
			Resource: audit.Resource{Type: "tool", ID: "tool_1"}, Outcome: audit.Success, Status: 201, RequestID: "req_3",
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Details: audit.Details(map[string]any{"method": "POST"})},
		audit.Record{Time: at, Tenant: "acme", Actor: audit.Actor{Sub: "alice"}, Action: "tool.read",
			Resource: audit.Resource{Type: "tool", ID: "tool_1"}, Outcome: audit.Denied, Status: 403, RequestID: "req_4",
			Details: audit.Details(map[string]any{"method": "GET", "code": "forbidden"})},
		audit.Record{Time: at, Tenant: "acme", Actor: audit.Actor{Sub: "alice"}, Action: "tool.update", Outcome: audit.Error,
			Status: 422, Details: audit.Details(map[string]any{"method": "PUT"})},
		audit.Record{Time: at, Tenant: "acme", Action: "tool.delete", Outcome: audit.Success, Status: 200,
			Details: audit.Details(map[string]any{"method": "DELETE"})},
		audit.Record{Time: at, Tenant: "acme", Actor: audit.Actor{Sub: "alice"}, Action: "tool.call", WorkflowID: "wf_1",
			Resource: audit.Resource{Type: "tool", ID: "tool_1"}, Outcome: audit.Denied, Status: 0,
			Details: audit.Details(map[string]any{"operation": "deleteUser"})},
		audit.Record{Time: at, Tenant: "acme", Actor: audit.Actor{Sub: "alice"}, Action: "workflow.step", WorkflowID: "wf_1",
			Outcome: audit.Success, Details: audit.Details(map[string]any{"agent": "triage", "agent_version": "2", "step": 1})},
		audit.Record{Time: at, Tenant: "acme", Actor: audit.Actor{Sub: "alice", ClientID: "cli_1"}, Action: "agent.invoke", WorkflowID: "wf_1",
			Resource: audit.Resource{Type: "agent", ID: "triage"}, Outcome: audit.Success, Status: 200,
			Details: audit.Details(map[string]any{"method": "POST"})},
		audit.Record{Time: at, Tenant: audit.SystemTenant, Action: "http.request", Outcome: audit.Error, Status: 404,
			Details: audit.Details(map[string]any{"method": "GET", "path": "/nowhere"})},
	)
	m := Mapper{Version: "test", OCSF: version}
	classes := map[int]int{}
	prev := ""
	for _, r := range recs {
		e, err := m.Event(r, prev)
		prev = r.ID
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if errs := facts.Check(b); len(errs) > 0 {
			t.Errorf("%s (%s) against OCSF %s:\n  %s\n%s", r.Action, r.Outcome, facts.Version, strings.Join(errs, "\n  "), b)
		}
		classes[e.ClassUID]++
		if e.Metadata.UID != r.ID || e.Metadata.Sequence != r.Seq || e.Metadata.TenantUID != r.Tenant || e.Metadata.Version != version {
			t.Errorf("%s: metadata %+v does not carry the record's id, seq and tenant", r.Action, e.Metadata)
		}
		if version == OCSFVersion14 {
			if e.Unmapped.Hash != r.Hash || e.Unmapped.PrevHash != r.PrevHash || e.AttestationList != nil {
				t.Errorf("%s: unmapped %+v does not carry the chain", r.Action, e.Unmapped)
			}
		} else {
			a := e.AttestationList
			if len(a) != 1 || a[0].Fingerprint.Value != r.Hash || a[0].ChainUID != "agentplane:audit:"+r.Tenant || e.Unmapped.Hash != "" ||
				(r.Seq == 1) != (a[0].PrevEvent == nil) || (r.Seq > 1 && a[0].PrevEvent.Fingerprint.Value != r.PrevHash) {
				t.Errorf("%s: attestation %+v does not carry the chain", r.Action, a)
			}
			if wantAgent := r.WorkflowID != "" && r.Action != "tool.call"; (e.AIAgent != nil) != wantAgent ||
				wantAgent && (e.AIAgent.Name != "triage" || e.AIAgent.InstanceUID != "wf_1") {
				t.Errorf("%s: ai_agent %+v", r.Action, e.AIAgent)
			}
		}
		// raw_data is the record itself: a SIEM can recompute its hash.
		var back audit.Record
		if err := json.Unmarshal([]byte(e.RawData), &back); err != nil {
			t.Fatalf("raw_data: %v", err)
		}
		if h, err := back.ComputeHash(); err != nil || h != r.Hash {
			t.Errorf("%s: raw_data hashes to %s, the record's hash is %s", r.Action, h, r.Hash)
		}
	}
	if classes[ClassAuthentication] != 2 || classes[ClassAPIActivity] != len(recs)-2 {
		t.Errorf("classes %v: want token grants as Authentication, the rest as API Activity", classes)
	}
}

// The checker itself finds what is wrong: an event without a required
// attribute, with an unknown attribute, a wrong type or an undefined enum.
func TestCheckFindsBadEvents(t *testing.T) {
	facts := loadFacts(t, OCSFVersion)
	r := sealed(t, audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "alice"}, Action: "tool.read", Outcome: audit.Success,
		Status: 200, Details: audit.Details(map[string]any{"method": "GET"})})[0]
	e, err := Mapper{}.Event(r, "")
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(e)
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"no src_endpoint", func(m map[string]any) { delete(m, "src_endpoint") }, "src_endpoint missing"},
		{"no metadata.version", func(m map[string]any) { delete(m["metadata"].(map[string]any), "version") }, "version missing"},
		{"api without operation", func(m map[string]any) { delete(m["api"].(map[string]any), "operation") }, "operation missing"},
		{"time as a string", func(m map[string]any) { m["time"] = "2026-11-21T10:00:00Z" }, "time: want an integer"},
		{"activity out of the enum", func(m map[string]any) { m["activity_id"] = 7 }, "activity_id 7"},
		{"an attribute the class lacks", func(m map[string]any) { m["seq"] = 1 }, "seq is not an attribute"},
		{"an empty user", func(m map[string]any) { m["actor"] = map[string]any{"user": map[string]any{}} }, "at_least_one"},
		{"another class", func(m map[string]any) { m["class_uid"] = 4001 }, "class_uid 4001"},
		{"an unknown hash algorithm", func(m map[string]any) {
			m["attestation_list"].([]any)[0].(map[string]any)["fingerprint"].(map[string]any)["algorithm_id"] = 42
		}, "algorithm_id: 42 is not a value"},
		{"an attestation without fingerprint", func(m map[string]any) {
			delete(m["attestation_list"].([]any)[0].(map[string]any), "fingerprint")
		}, "at_least_one of [fingerprint signatures]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			_ = json.Unmarshal(good, &m)
			tc.edit(m)
			b, _ := json.Marshal(m)
			errs := strings.Join(facts.Check(b), "\n")
			if !strings.Contains(errs, tc.want) {
				t.Errorf("Check found %q, want it to name %q", errs, tc.want)
			}
		})
	}
	if errs := facts.Check(good); len(errs) > 0 {
		t.Errorf("a good event: %v", errs)
	}
}
