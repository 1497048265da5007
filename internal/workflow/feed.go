package workflow

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// ChangeFeed is a store shared by replicas that tells each of what the
// others did, as it happens (PostgreSQL's LISTEN/NOTIFY). While it is live,
// followers wait for it and for local writes without polling; while it is
// down, a replica learns the same by polling: followers re-read a workflow
// every followPoll, and expired leases are claimed on the runner's tick. A
// store without one is not shared (SQLite): every write is local, so
// followers wait for local writes, re-reading only every localPoll.
type ChangeFeed interface {
	// WatchChanges calls w's functions until ctx ends, reconnecting after
	// a failure, and returns ctx's error.
	WatchChanges(ctx context.Context, w Watch) error
}

// Watch is what a replica does with what another one did.
type Watch struct {
	// Changed is called with workflows whose history grew or that ended.
	Changed func(ids []string)
	// Cancelled is called with workflows someone asked to cancel.
	Cancelled func(ids []string)
	// Released is called when a replica gave its workflows up (a drain).
	Released func()
	// Live is called with true once the feed is listening and with false
	// when it lost its connection; after a false, anything may have been
	// missed.
	Live func(bool)
}

// feed is the runner's side of a ChangeFeed.
type feed struct {
	// shared is set when the store has a change feed: replicas share it.
	shared bool
	live   atomic.Bool
	// released wakes the recovery loop at once.
	released chan struct{}
}

func newFeed(shared bool) *feed { return &feed{shared: shared, released: make(chan struct{}, 1)} }

// poll is how long a follower waits for a wake-up before re-reading; 0
// waits for the wake-up alone.
func (f *feed) poll() time.Duration {
	switch {
	case !f.shared:
		// Spread out, so that followers opened together do not all
		// re-read at once.
		return localPoll - rand.N(localPoll/4)
	case f.live.Load():
		// Every change, local or not, wakes the follower; when the feed
		// goes down, every follower is woken to poll instead.
		return 0
	}
	return followPoll
}

// watch follows the store's change feed, when it has one, until ctx ends.
func (r *Runner) watch(ctx context.Context) {
	cf, ok := r.opts.Store.(ChangeFeed)
	if !ok {
		return
	}
	err := cf.WatchChanges(ctx, Watch{
		Changed: func(ids []string) {
			for _, id := range ids {
				r.hub.notify(id)
			}
		},
		Cancelled: func(ids []string) {
			for _, id := range ids {
				r.stop(id, errCancel)
			}
		},
		Released: func() {
			select {
			case r.feed.released <- struct{}{}:
			default:
			}
		},
		Live: func(live bool) {
			if was := r.feed.live.Swap(live); live != was {
				// Up: whatever happened while the feed was down was
				// missed, so every follower re-reads now. Down: followers
				// waiting for the feed alone start polling.
				r.hub.notifyAll()
			}
		},
	})
	if err != nil && ctx.Err() == nil {
		r.opts.Logger.Warn("workflow change feed stopped", "err", err)
	}
	if r.feed.live.Swap(false) {
		r.hub.notifyAll()
	}
}
