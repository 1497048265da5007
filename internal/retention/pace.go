package retention

import (
	"math"
	"time"
)

// WriteCounter counts the writes this replica's store has committed, its
// own requests' and the sweeper's alike: the sweeper's sign that requests
// are being served.
type WriteCounter interface {
	CommittedWrites() int64
}

// Beside is implemented by a store whose sweep batches and audit trims are
// transactions of their own beside the requests' writes, not holds of a
// writer the requests' writes queue for (PostgreSQL). A batch's length then
// delays no request's write, so the sweeper does not size batches to its
// Target but always takes full ones (Batch, AuditBatch), paced by Share.
type Beside interface {
	SweepsBesideWrites() bool
}

// pacer sizes a sweep's batches to a time budget and spaces them by the
// load: a batch holds the store's writer for about target at most, and
// while other writes are committed between batches the sweep takes at most
// share of the writing time. With no target (a store whose batches hold no
// writer, see Beside) every batch is a full one.
type pacer struct {
	target   time.Duration
	max      int
	share    float64
	minPause time.Duration
	// size is the next batch's.
	size int
}

func newPacer(target time.Duration, maxSize int, share float64, minPause time.Duration) *pacer {
	p := &pacer{target: target, max: max(1, maxSize), share: share, minPause: minPause, size: 1}
	if target <= 0 {
		p.size = p.max
	}
	return p
}

// next takes a full batch just done (it deleted as many as it was asked),
// which took took, and whether other writes were committed since the
// previous batch; it sets the next batch's size and returns the pause
// before it. A batch over the target halves the size, one under half the
// target doubles it, up to max and never below one. Under load
// the pause is took × (1−share)/share, so batches take share of the time;
// without it, minPause.
func (p *pacer) next(took time.Duration, busy bool) time.Duration {
	switch {
	case p.target <= 0:
	case took > p.target:
		p.size = max(1, p.size/2)
	case took < p.target/2:
		p.size = min(p.max, p.size*2)
	}
	if !busy || p.share >= 1 {
		return p.minPause
	}
	return max(p.minPause, time.Duration(math.Round(float64(took)*(1-p.share)/p.share)))
}

// loadMeter tells whether writes other than the sweeper's own were
// committed since it last looked.
type loadMeter struct {
	writes WriteCounter
	last   int64
	// own are the sweeper's writes since last.
	own int64
}

func newLoadMeter(w WriteCounter) *loadMeter {
	m := &loadMeter{writes: w}
	if w != nil {
		m.last = w.CommittedWrites()
	}
	return m
}

// wrote counts one committed write of the sweeper's own.
func (m *loadMeter) wrote() { m.own++ }

// busy reports whether others wrote since the previous call (always true
// without a counter: the sweep then always yields).
func (m *loadMeter) busy() bool {
	if m.writes == nil {
		return true
	}
	now := m.writes.CommittedWrites()
	others := now - m.last - m.own
	m.last, m.own = now, 0
	return others > 0
}
