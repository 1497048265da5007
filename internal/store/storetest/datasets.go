package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
)

func newDataset(tenant, name string, wfs []string, exp map[string]replay.Expectation, i int) *replay.Dataset {
	return &replay.Dataset{ID: fmt.Sprintf("ds_%s_%s_%d", tenant, name, i), Tenant: tenant, Name: name,
		Description: "the checkout cases", WorkflowIDs: wfs, WorkflowCount: len(wfs), Expectations: exp,
		Creator: replay.Creator{Sub: "user-1", Scopes: []string{"workflows:replay"}}, CreatedAt: base.Add(time.Duration(i) * time.Second)}
}

// testDatasetVersions creates a dataset, refuses its name again, adds a
// version, and reads both back with their workflows and expectations.
func testDatasetVersions(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	exp := map[string]replay.Expectation{
		"wf_b": {Outcome: "cleared"},
		"wf_c": {Outcome: "escalated", Output: json.RawMessage(`{"case":"open"}`)},
	}
	d1 := newDataset("acme", "checkout", []string{"wf_c", "wf_a", "wf_b"}, exp, 1)
	d1.Filter = json.RawMessage(`{"agent":"fraud-triage"}`)
	rec := record("acme", "dataset.create", 1)
	rec.Resource = audit.Resource{Type: "dataset", ID: d1.ID}
	must(t, s.CreateDataset(ctx, d1, rec), "create dataset")
	if d1.Version != 1 {
		t.Errorf("first version = %d, want 1", d1.Version)
	}
	wantCode(t, s.CreateDataset(ctx, newDataset("acme", "checkout", []string{"wf_a"}, nil, 2), record("acme", "dataset.create", 2)),
		problem.Conflict, "the same name again")
	// Another tenant may use the name.
	must(t, s.CreateDataset(ctx, newDataset("other", "checkout", []string{"wf_x"}, nil, 3), record("other", "dataset.create", 3)), "other tenant's dataset")

	d2 := newDataset("acme", "checkout", []string{"wf_d"}, nil, 4)
	must(t, s.AddDatasetVersion(ctx, d2, record("acme", "dataset.update", 4)), "next version")
	if d2.Version != 2 {
		t.Errorf("next version = %d, want 2", d2.Version)
	}
	wantCode(t, s.AddDatasetVersion(ctx, newDataset("acme", "nothing", []string{"wf_a"}, nil, 5), record("acme", "dataset.update", 5)),
		problem.NotFound, "a version of an unknown dataset")

	got, err := s.Dataset(ctx, "acme", "checkout", 1)
	must(t, err, "version 1")
	if diff := cmp.Diff(d1, got); diff != "" {
		t.Errorf("version 1 (-want +got):\n%s", diff)
	}
	latest, err := s.Dataset(ctx, "acme", "checkout", 0)
	must(t, err, "latest")
	if latest.Version != 2 || !slices.Equal(latest.WorkflowIDs, []string{"wf_d"}) || len(latest.Expectations) != 0 {
		t.Errorf("latest = %+v", latest)
	}
	wantCode(t, errOf(s.Dataset(ctx, "acme", "checkout", 3)), problem.NotFound, "a version not made")
	wantCode(t, errOf(s.Dataset(ctx, "nobody", "checkout", 0)), problem.NotFound, "another tenant's dataset")
}

// testDatasetList lists the latest version of each dataset, by name, paged.
func testDatasetList(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	for i, name := range []string{"gamma", "alpha", "beta"} {
		must(t, s.CreateDataset(ctx, newDataset("acme", name, []string{"wf_a", "wf_b"}, nil, i), record("acme", "dataset.create", i)), name)
	}
	must(t, s.AddDatasetVersion(ctx, newDataset("acme", "beta", []string{"wf_c"}, nil, 9), record("acme", "dataset.update", 9)), "beta@2")
	first, err := s.ListDatasets(ctx, "acme", replay.DatasetListFilter{Limit: 2})
	must(t, err, "first page")
	second, err := s.ListDatasets(ctx, "acme", replay.DatasetListFilter{Limit: 2, After: "beta"})
	must(t, err, "second page")
	var got []string
	for _, d := range append(first, second...) {
		got = append(got, fmt.Sprintf("%s@%d/%d", d.Name, d.Version, d.WorkflowCount))
		if d.WorkflowIDs != nil {
			t.Errorf("%s: a list carries workflow ids", d.Ref())
		}
	}
	if want := []string{"alpha@1/2", "beta@2/1", "gamma@1/2"}; !slices.Equal(got, want) {
		t.Errorf("datasets %v, want %v", got, want)
	}
	none, err := s.ListDatasets(ctx, "other", replay.DatasetListFilter{})
	must(t, err, "other tenant")
	if len(none) != 0 {
		t.Errorf("another tenant lists %d datasets", len(none))
	}
}

// testBatchChecks stores a batch with checks and expectations: items carry
// their expectations, results are counted once each, the verdict comes
// when the batch ends, and the replays that failed a check page in order.
func testBatchChecks(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	b := replay.NewBatch("acme", "triage@2", 3, replay.Creator{Sub: "user-1"}, base)
	b.Dataset = "checkout@2"
	b.Spec = replay.Spec{Checks: []replay.CheckSpec{{Name: "outcome_unchanged"}, {Name: "cheap", Expr: "true"}},
		Gate: map[string]float64{"outcome_unchanged": 0.5}}
	b.Expectations = map[string]replay.Expectation{"wf_b": {Outcome: "cleared"}}
	wfs := []string{"wf_a", "wf_b", "wf_c"}
	must(t, s.CreateBatch(ctx, b, wfs, "replica-1", base.Add(time.Minute), record("acme", "replay_batch.create", 0)), "create batch")

	pending, err := s.PendingItems(ctx, b.ID, -1, 10)
	must(t, err, "pending")
	if len(pending) != 3 || pending[0].Expected != nil || pending[1].Expected == nil || pending[1].Expected.Outcome != "cleared" {
		t.Fatalf("pending items %+v: want wf_b's expectation only", pending)
	}
	result := func(name string, passed bool, errMsg string) replay.CheckResult {
		return replay.CheckResult{Name: name, Passed: passed, Error: errMsg}
	}
	add := func(pos, i int, checks ...replay.CheckResult) int {
		r := batchReplay("acme", wfs[pos], "cleared", "cleared", i)
		r.Checks = checks
		n, err := s.AddBatchReplays(ctx, b.ID, []replay.BatchReplay{{Position: pos, Replay: r}})
		must(t, err, "add replay")
		return n
	}
	add(0, 0, result("outcome_unchanged", true, ""), result("cheap", true, ""))
	add(2, 2, result("outcome_unchanged", false, ""), result("cheap", false, "evaluate: no such key"))
	if n := add(2, 7, result("outcome_unchanged", true, ""), result("cheap", true, "")); n != 0 {
		t.Errorf("a second replay of a workflow was stored")
	}

	got, err := s.Batch(ctx, "acme", b.ID)
	must(t, err, "batch")
	half := 0.5
	want := []replay.CheckTotal{
		{Name: "outcome_unchanged", Passed: 1, Failed: 1, PassRate: 0.5, Gate: &half},
		{Name: "cheap", Passed: 1, Errored: 1, PassRate: 0.5},
	}
	if diff := cmp.Diff(want, got.Checks); diff != "" {
		t.Errorf("check totals (-want +got):\n%s", diff)
	}
	if got.Verdict != "" || got.Dataset != "checkout@2" || !slices.Equal(got.Spec.Names(), []string{"outcome_unchanged", "cheap"}) {
		t.Errorf("running batch: verdict %q dataset %q spec %+v", got.Verdict, got.Dataset, got.Spec)
	}
	failed, err := s.FailedCheckReplays(ctx, b.ID, 0, 10)
	must(t, err, "failed check replays")
	if len(failed) != 1 || failed[0].WorkflowID != "wf_c" || len(failed[0].Checks) != 2 || failed[0].Checks[1].Error == "" {
		t.Errorf("replays that failed a check: %v", replayIDs(failed))
	}

	add(1, 1, result("outcome_unchanged", true, ""), result("cheap", true, ""))
	if ok, err := s.FinishBatch(ctx, b.ID, replay.BatchCompleted, "", base.Add(time.Hour)); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	got, err = s.Batch(ctx, "acme", b.ID)
	must(t, err, "finished batch")
	if got.Verdict != replay.VerdictPassed || got.Checks[0].Passed != 2 {
		t.Errorf("finished batch: verdict %q, checks %+v; want passed: the gate is on outcome_unchanged only (2 of 3 ≥ 0.5)", got.Verdict, got.Checks)
	}
	list, err := s.ListBatches(ctx, "acme", replay.BatchListFilter{})
	must(t, err, "list")
	if len(list) != 1 || list[0].Dataset != "checkout@2" {
		t.Errorf("listed batches %+v", list)
	}
}
