package audit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// memStore is a fake Store for the chain logic; the real stores run the
// conformance suite in internal/store/storetest.
type memStore struct{ recs []Record }

func (m *memStore) AppendAudit(_ context.Context, recs ...*Record) error {
	for _, r := range recs {
		prev := Genesis
		if n := len(m.recs); n > 0 {
			prev = m.recs[n-1].Hash
		}
		if err := r.Seal(int64(len(m.recs))+1, prev); err != nil {
			return err
		}
		m.recs = append(m.recs, *r)
	}
	return nil
}

func (m *memStore) QueryAudit(context.Context, string, Filter) ([]Record, error) { return nil, nil }

func (m *memStore) ScanAudit(_ context.Context, _ string, after int64, limit int, fn func(Record) error) (int, error) {
	n := 0
	for _, r := range m.recs {
		if r.Seq > after && n < limit {
			n++
			if err := fn(r); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func record(action string) *Record {
	return &Record{
		ID: "aud_1", Time: time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC), Tenant: "acme",
		Actor: Actor{Sub: "alice"}, Action: action, Resource: Resource{Type: "tool", ID: "tool_1"},
		Outcome: Success, Status: 201, RequestID: "req_1", Details: Details(map[string]any{"n": 1.0}),
	}
}

func TestChainVerifiesAndDetectsTampering(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	for _, a := range []string{"tool.create", "tool.read", "tool.delete"} {
		if err := s.AppendAudit(ctx, record(a)); err != nil {
			t.Fatal(err)
		}
	}
	if s.recs[0].PrevHash != Genesis || s.recs[1].PrevHash != s.recs[0].Hash {
		t.Fatal("records are not chained")
	}
	rep, err := Verify(ctx, s, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Report{OK: true, RecordsChecked: 3}, rep); diff != "" {
		t.Fatalf("verify (-want +got):\n%s", diff)
	}

	s.recs[1].Status = 200
	rep, _ = Verify(ctx, s, "acme")
	if rep.OK || rep.FirstBadSeq == nil || *rep.FirstBadSeq != 2 {
		t.Fatalf("tampered chain: %+v", rep)
	}
}

func TestHashSurvivesJSONRoundTrip(t *testing.T) {
	r := record("tool.create")
	if err := r.Seal(1, Genesis); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// Key order and number spelling change; the canonical form does not.
	back.Details = json.RawMessage(`{ "n" : 1 }`)
	if h, _ := back.ComputeHash(); h != r.Hash {
		t.Fatalf("hash after round trip %s, want %s", h, r.Hash)
	}
}

func TestPrepareFillsWhatIsMissing(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.FixedZone("x", 3600))
	set := &Record{ID: "aud_given", Time: now.Add(-time.Hour), Details: json.RawMessage(`{"a":1}`)}
	empty := &Record{}
	Prepare(func() time.Time { return now }, set, nil, empty)
	if set.ID != "aud_given" || !set.Time.Equal(now.Add(-time.Hour)) || set.Time.Location() != time.UTC || string(set.Details) != `{"a":1}` {
		t.Errorf("a filled record changed: %+v", set)
	}
	if !strings.HasPrefix(empty.ID, "aud_") || !empty.Time.Equal(now) || empty.Time.Location() != time.UTC || string(empty.Details) != "{}" {
		t.Errorf("an empty record was not filled: %+v", empty)
	}
}
