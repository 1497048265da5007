package storetest

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/replay"
)

// UncountedBatches are batches of tenant acme, each of three workflows,
// as stored before batches kept counters: an engine's migration test
// writes them with the schema of the time, migrates, and calls
// CheckCountedBatches.
var UncountedBatches = []struct{ ID, Status string }{{"rpb_1", "running"}, {"rpb_2", "completed"}, {"rpb_3", "running"}}

// UncountedItems are the items of UncountedBatches: rpb_1 has two of three
// replayed, one changed; rpb_2 all three, two changed; rpb_3 none. An item
// without ReplayID has no replay yet.
var UncountedItems = []struct {
	Batch, WorkflowID, ReplayID, From, To string
	Position                              int
}{
	{"rpb_1", "wf_1", "rpl_1", "routed", "escalated", 0}, {"rpb_1", "wf_2", "rpl_2", "routed", "routed", 1}, {"rpb_1", "wf_3", "", "", "", 2},
	{"rpb_2", "wf_1", "rpl_3", "routed", "escalated", 0}, {"rpb_2", "wf_2", "rpl_4", "approved", "declined", 1}, {"rpb_2", "wf_3", "rpl_5", "routed", "routed", 2},
	{"rpb_3", "wf_1", "", "", "", 0}, {"rpb_3", "wf_2", "", "", "", 1}, {"rpb_3", "wf_3", "", "", "", 2},
}

// CheckCountedBatches checks that the migration counted UncountedBatches
// from their items: their progress and the list show what the items say.
func CheckCountedBatches(ctx context.Context, t *testing.T, s replay.BatchStore) {
	t.Helper()
	want := map[string]replay.Progress{
		"rpb_1": {Status: "running", Total: 3, Done: 2, Changed: 1},
		"rpb_2": {Status: "completed", Total: 3, Done: 3, Changed: 2},
		"rpb_3": {Status: "running", Total: 3},
	}
	got := map[string]replay.Progress{}
	for id := range want {
		p, err := s.BatchProgress(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		got[id] = p
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress after the migration (-want +got):\n%s", diff)
	}
	listed, err := s.ListBatches(ctx, "acme", replay.BatchListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range listed {
		if w := want[b.ID]; b.Done != w.Done || b.Changed != w.Changed {
			t.Errorf("listed %s: %d done, %d changed; want %d, %d", b.ID, b.Done, b.Changed, w.Done, w.Changed)
		}
	}
}
