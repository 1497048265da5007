package retention

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPacerSizesBatchesToTheTarget: a batch over the target halves the
// next, never below one; one under half of it doubles the next, up to the
// maximum; one in between keeps it.
func TestPacerSizesBatchesToTheTarget(t *testing.T) {
	p := newPacer(4*time.Millisecond, 100, 0.25, time.Millisecond)
	var sizes []int
	for _, took := range []time.Duration{
		time.Millisecond, time.Millisecond, time.Millisecond, // 1 → 2 → 4 → 8
		3 * time.Millisecond,                                                                                         // 8 stays
		9 * time.Millisecond, 9 * time.Millisecond, 9 * time.Millisecond, 9 * time.Millisecond, 9 * time.Millisecond, // 4, 2, 1, 1, 1
		0, 0, 0, 0, 0, 0, 0, 0, // 2, 4, …, 100, 100
	} {
		p.next(took, false)
		sizes = append(sizes, p.size)
	}
	want := []int{2, 4, 8, 8, 4, 2, 1, 1, 1, 2, 4, 8, 16, 32, 64, 100, 100}
	if diff := cmp.Diff(want, sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
}

// TestPacerWithoutATargetTakesFullBatches: with no target (a store whose
// batches hold no writer) every batch is a full one, however long the last
// took, and the pause still follows the load.
func TestPacerWithoutATargetTakesFullBatches(t *testing.T) {
	p := newPacer(0, 100, 0.25, time.Millisecond)
	for _, took := range []time.Duration{0, 50 * time.Millisecond, time.Second} {
		if p.size != 100 {
			t.Fatalf("size %d before a batch of %s, want 100", p.size, took)
		}
		if pause := p.next(took, true); pause != max(time.Millisecond, 3*took) {
			t.Errorf("pause after a batch of %s under load = %s, want %s", took, pause, 3*took)
		}
	}
}

// TestPacerPausesByLoad: under load the pause makes batches share of the
// time (at least the minimum pause); without it, the minimum pause.
func TestPacerPausesByLoad(t *testing.T) {
	for _, tc := range []struct {
		share float64
		took  time.Duration
		busy  bool
		want  time.Duration
	}{
		{0.25, 4 * time.Millisecond, true, 12 * time.Millisecond},
		{0.1, 2 * time.Millisecond, true, 18 * time.Millisecond},
		{0.5, 3 * time.Millisecond, true, 3 * time.Millisecond},
		{0.5, 100 * time.Microsecond, true, time.Millisecond}, // the minimum
		{1, 4 * time.Millisecond, true, time.Millisecond},
		{0.1, 4 * time.Millisecond, false, time.Millisecond},
	} {
		p := newPacer(5*time.Millisecond, 100, tc.share, time.Millisecond)
		if got := p.next(tc.took, tc.busy); got != tc.want {
			t.Errorf("share %v, batch of %s, busy %v: pause %s, want %s", tc.share, tc.took, tc.busy, got, tc.want)
		}
	}
}

// fakeStore deletes workflows at cost each on a fake clock and counts
// committed writes, its own and those of the requests script adds during
// each pause.
type fakeStore struct {
	Store
	now       time.Time
	cost      time.Duration
	left      int64
	writes    int64
	asked     []int
	renewals  int
	requests  []int64 // writes others commit during each pause, in turn
	pauses    []time.Duration
	loseLease int // the renewal that finds the lease taken (0: none)
	records   int64
	trims     []int
}

func (f *fakeStore) AuditTenants(context.Context) ([]string, error) { return []string{"acme"}, nil }

func (f *fakeStore) TrimAudit(_ context.Context, _ string, _ time.Time, limit int, _ CheckpointRecord) (Trimmed, error) {
	f.trims = append(f.trims, limit)
	n := min(int64(limit), f.records)
	f.records -= n
	took := time.Duration(n) * f.cost / 10
	f.now = f.now.Add(took)
	f.writes++
	return Trimmed{Removed: n, Took: took}, nil
}

func (f *fakeStore) CommittedWrites() int64 { return f.writes }

func (f *fakeStore) TakeLease(context.Context, string, string, time.Time, time.Time) (bool, error) {
	f.writes++
	f.renewals++
	return f.renewals != f.loseLease, nil
}

func (f *fakeStore) SweepWorkflows(_ context.Context, _ Scope, limit int, rec SweepRecord) (Swept, error) {
	f.asked = append(f.asked, limit)
	n := min(int64(limit), f.left)
	f.left -= n
	took := time.Duration(n) * f.cost
	f.now = f.now.Add(took)
	f.writes++
	if n == 0 {
		return Swept{}, nil
	}
	c := Counts{Workflows: n}
	if r := rec("acme", c); r == nil || r.Action != ActionSweep {
		return Swept{}, nil
	}
	return Swept{Counts: map[string]Counts{"acme": c}, Took: took}, nil
}

func (f *fakeStore) sleep(_ context.Context, d time.Duration) error {
	f.pauses = append(f.pauses, d)
	f.now = f.now.Add(d)
	if i := len(f.pauses) - 1; i < len(f.requests) {
		f.writes += f.requests[i]
	}
	return nil
}

func (f *fakeStore) sweeper() *Sweeper {
	return &Sweeper{Store: f, Writes: f, Owner: "a", Policy: Policy{Default: time.Hour},
		Target: 4 * time.Millisecond, Share: 0.2, Pause: time.Millisecond,
		Now: func() time.Time { return f.now }, Sleep: f.sleep}
}

// TestSweepYieldsToRequests: batches grow to the target, the sweep pauses
// four times each batch (a share of 0.2) after the batches during which
// requests wrote and only the minimum after the others, its own writes
// (the lease, the batches) never counting as load.
func TestSweepYieldsToRequests(t *testing.T) {
	f := &fakeStore{now: time.Unix(1e9, 0), cost: 100 * time.Microsecond, left: 200,
		requests: []int64{0, 3, 0, 1, 1, 0}}
	res, err := f.sweeper().Sweep(t.Context())
	if err != nil || !res.Held || res.Workflows.Workflows != 200 {
		t.Fatalf("Sweep: %+v, %v; want 200 workflows deleted", res, err)
	}
	// 1, 2, 4, 8, 16 (1.6 ms, under half the target: doubles), 32 (3.2
	// ms: stays), 32, …; the last batch finds fewer than asked and ends.
	wantAsked := []int{1, 2, 4, 8, 16, 32, 32, 32, 32, 32, 32}
	if diff := cmp.Diff(wantAsked, f.asked); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	if res.Batches != len(wantAsked) {
		t.Errorf("%d batches reported, want %d", res.Batches, len(wantAsked))
	}
	// The requests' writes during pause i are seen after batch i+1.
	ms := time.Millisecond
	wantPauses := []time.Duration{ms, ms, 4 * 400 * time.Microsecond, ms, 4 * 1600 * time.Microsecond,
		4 * 3200 * time.Microsecond, ms, ms, ms, ms}
	if diff := cmp.Diff(wantPauses, f.pauses); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
	if f.renewals != len(wantAsked) {
		t.Errorf("%d lease renewals, want one before each of the %d batches", f.renewals, len(wantAsked))
	}
}

// besideStore is a fakeStore whose batches run beside the writes.
type besideStore struct{ *fakeStore }

func (besideStore) SweepsBesideWrites() bool { return true }

// TestSweepBesideTheWritesTakesFullBatches: on a store whose batches hold
// no writer, every batch and trim asks for the most, however long the last
// took, and the pauses still follow the load.
func TestSweepBesideTheWritesTakesFullBatches(t *testing.T) {
	f := &fakeStore{now: time.Unix(1e9, 0), cost: time.Millisecond, left: 250, records: 5000,
		requests: []int64{1, 1, 1, 1, 1, 1}}
	s := f.sweeper()
	s.Store, s.Batch, s.AuditBatch = besideStore{f}, 100, 2000
	s.Policy.Audit = time.Hour
	if _, err := s.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{100, 100, 100}, f.asked); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2000, 2000, 2000}, f.trims); diff != "" {
		t.Errorf("trim sizes (-want +got):\n%s", diff)
	}
	// Batches of 100 ms and trims of 200 ms at a share of 0.2: four times
	// as long under load (the requests' writes of each pause are seen
	// after the next batch), the minimum before.
	ms := time.Millisecond
	wantPauses := []time.Duration{ms, 4 * 100 * ms, 4 * 200 * ms, 4 * 200 * ms}
	if diff := cmp.Diff(wantPauses, f.pauses); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
}

// TestSweepWithoutACounterAlwaysYields: with no write counter the sweep
// paces every batch as under load.
func TestSweepWithoutACounterAlwaysYields(t *testing.T) {
	f := &fakeStore{now: time.Unix(1e9, 0), cost: time.Millisecond, left: 10}
	s := f.sweeper()
	s.Writes = nil
	if _, err := s.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Batches of 1, 2 (2 ms: stays), 2, 2, 2, then 1 of 2 asked.
	want := []time.Duration{4 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond}
	if diff := cmp.Diff(want, f.pauses); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
}

// TestSweepStopsWhenTheLeaseIsLost: the renewal before a batch that finds
// the lease taken ends the pass.
func TestSweepStopsWhenTheLeaseIsLost(t *testing.T) {
	f := &fakeStore{now: time.Unix(1e9, 0), cost: time.Millisecond, left: 100, loseLease: 3}
	res, err := f.sweeper().Sweep(t.Context())
	if err != nil || res.Workflows.Workflows != 3 || len(f.asked) != 2 {
		t.Errorf("Sweep: %+v, %v after %d batches; want 3 workflows in 2 batches", res, err, len(f.asked))
	}
}

// TestTrimIsPacedTheSameWay: audit trims grow to the target as sweep
// batches do, up to AuditBatch, and pause by load.
func TestTrimIsPacedTheSameWay(t *testing.T) {
	f := &fakeStore{now: time.Unix(1e9, 0), cost: 100 * time.Microsecond, records: 300, requests: []int64{1, 1, 1, 1, 1, 1, 1, 1, 1}}
	s := f.sweeper()
	s.Policy, s.AuditBatch = Policy{Audit: time.Hour}, 64
	res, err := s.Sweep(t.Context())
	if err != nil || res.AuditRecords != 300 {
		t.Fatalf("Sweep: %+v, %v; want 300 records trimmed", res, err)
	}
	// 10 µs a record: 1, 2, …, 64 (0.64 ms, under half the target), 64, …
	want := []int{1, 2, 4, 8, 16, 32, 64, 64, 64, 64}
	if diff := cmp.Diff(want, f.trims); diff != "" {
		t.Errorf("trim sizes (-want +got):\n%s", diff)
	}
	// The requests' writes of each pause are seen after the next trim.
	if f.pauses[0] != time.Millisecond || f.pauses[6] != 4*640*time.Microsecond {
		t.Errorf("pauses %v, want 1ms first and 2.56ms after the seventh trim", f.pauses)
	}
}
