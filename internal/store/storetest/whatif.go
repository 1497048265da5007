package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/replay"
)

// testLiveBatch checks what a live batch keeps: its mode and concurrency,
// its journal of completions (each key once, dropped when the batch
// finishes), and the usage it sums over its replays.
func testLiveBatch(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	b := replay.NewBatch("acme", "triage@2", 3, replay.Creator{Sub: "user-1"}, base)
	b.Mode, b.Concurrency = replay.Mode{LLM: replay.LLMLive, UnrecordedCalls: replay.UnrecordedRead}, 32
	wfs := []string{"wf_a", "wf_b", "wf_c"}
	must(t, s.CreateBatch(ctx, b, wfs, "replica-1", base.Add(time.Minute), nil), "create batch")
	got, err := s.Batch(ctx, "acme", b.ID)
	must(t, err, "batch")
	if got.Mode != b.Mode || got.Concurrency != 32 {
		t.Errorf("batch mode %+v concurrency %d, want %+v and 32", got.Mode, got.Concurrency, b.Mode)
	}
	if diff := cmp.Diff(replay.Usages{}, got.Usage); diff != "" {
		t.Errorf("usage of a batch with no replay (-want +got):\n%s", diff)
	}

	must(t, s.JournalCompletion(ctx, b.ID, "wf_a", 1, "h1", []byte(`{"n":1}`)), "journal 1")
	must(t, s.JournalCompletion(ctx, b.ID, "wf_a", 2, "h2", []byte(`{"n":2}`)), "journal 2")
	must(t, s.JournalCompletion(ctx, b.ID, "wf_a", 1, "h1", []byte(`{"n":1,"again":true}`)), "journal 1 again")
	must(t, s.JournalCompletion(ctx, b.ID, "wf_b", 1, "h1", []byte(`{"n":1,"of":"b"}`)), "journal b")
	rows, err := s.JournaledCompletions(ctx, b.ID, "wf_a")
	must(t, err, "journaled")
	var texts []string
	for _, r := range rows {
		texts = append(texts, string(r))
	}
	slices.Sort(texts)
	if diff := cmp.Diff([]string{`{"n":1}`, `{"n":2}`}, texts); diff != "" {
		t.Errorf("journal of wf_a (-want +got):\n%s", diff)
	}

	side := func(in, out int64, n int, cost *replay.Cost) replay.Usage {
		return replay.Usage{InputTokens: in, OutputTokens: out, Completions: n, Cost: cost}
	}
	usages := []replay.Usages{
		{Original: side(100, 10, 2, &replay.Cost{Amount: 0.5, Currency: "USD"}), Replay: side(200, 20, 3, &replay.Cost{Amount: 1, Currency: "USD"})},
		{Original: side(50, 5, 1, &replay.Cost{Amount: 0.25, Currency: "USD"}), Replay: side(70, 7, 1, nil)},
		{Original: side(0, 0, 0, nil), Replay: side(0, 0, 0, nil)},
	}
	var brs []replay.BatchReplay
	for i, u := range usages {
		r := batchReplay("acme", wfs[i], "routed", "routed", i)
		r.Usage = u
		brs = append(brs, replay.BatchReplay{Position: i, Replay: r})
	}
	if n, err := s.AddBatchReplays(ctx, b.ID, brs); err != nil || n != 3 {
		t.Fatalf("add replays: %d, %v", n, err)
	}
	got, err = s.Batch(ctx, "acme", b.ID)
	must(t, err, "batch")
	// The replay side has an unpriced completion: its cost is left out.
	want := replay.Usages{Original: side(150, 15, 3, &replay.Cost{Amount: 0.75, Currency: "USD"}), Replay: side(270, 27, 4, nil)}
	if diff := cmp.Diff(want, got.Usage); diff != "" {
		t.Errorf("batch usage (-want +got):\n%s", diff)
	}

	if ok, err := s.FinishBatch(ctx, b.ID, replay.BatchCompleted, "", base.Add(time.Second)); err != nil || !ok {
		t.Fatalf("finish: %v, %v", ok, err)
	}
	rows, err = s.JournaledCompletions(ctx, b.ID, "wf_b")
	must(t, err, "journaled after finish")
	if len(rows) != 0 {
		t.Errorf("a finished batch still journals %d completions", len(rows))
	}
}
