package replay

import (
	"cmp"
	"context"
	"iter"
	"sync"
	"time"
)

// Progress is where a batch stands, as its counters say: one row to read
// however large the batch, all a follower needs between events.
type Progress struct {
	Status string
	Total  int
	Done   int
	// Changed counts the replays whose outcome differs from the original's.
	Changed int
}

// Running reports whether the batch is still running.
func (p Progress) Running() bool { return p.Status == BatchRunning }

// DefaultFollowPoll is how often a follower of a batch reads its progress
// with no word of a change: the path by which a batch that another replica
// runs, or cancels, reaches a follower on this one.
const DefaultFollowPoll = 3 * time.Second

// followGap is the least time between two reads of one follower: changes
// closer together than that reach it as one.
const followGap = 250 * time.Millisecond

// endedShare is how long the whole batch read for a follower of a batch
// that has ended is served to the others: woken together by its end, they
// would otherwise each sum over every item at once.
const endedShare = time.Second

// batchHub wakes this server's followers of a batch when it changes.
type batchHub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
	// ended are the reads of ended batches, by tenant and id, under way
	// or made within endedShare.
	ended map[[2]string]*endedRead
}

// endedRead is one read of a batch that has ended; done is closed once b
// or err is set.
type endedRead struct {
	done chan struct{}
	b    *Batch
	err  error
}

// subscribe returns a channel that receives when batch id changes, and the
// function that ends the subscription.
func (h *batchHub) subscribe(id string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[string]map[chan struct{}]struct{}{}
	}
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	h.subs[id][c] = struct{}{}
	return c, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[id], c)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
	}
}

// notify wakes the followers of batch id; a follower not yet back from
// its last wake-up takes this one with it.
func (h *batchHub) notify(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs[id] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Changed wakes this server's followers of batch id after a change Run did
// not make (a cancel, say); Run wakes them itself when it stores replays or
// finishes a batch.
func (r *BatchRunner) Changed(id string) {
	r.init()
	r.hub.notify(id)
}

// Follow yields the tenant's batch's progress now and after each change,
// until it has yielded the progress of a batch no longer running, or ctx
// ends (silently). A change made on this server wakes it at once, though it
// reads the batch at most every 250 ms; one made on another replica
// reaches it within FollowPoll.
func (r *BatchRunner) Follow(ctx context.Context, tenant, id string) iter.Seq2[Progress, error] {
	r.init()
	return func(yield func(Progress, error) bool) {
		// Subscribed before the first read, so no change after it is missed.
		changed, stop := r.hub.subscribe(id)
		defer stop()
		poll := time.NewTimer(0)
		defer poll.Stop()
		var last Progress
		for first := true; ; first = false {
			read := time.Now()
			p, err := r.Store.BatchProgress(ctx, tenant, id)
			if err != nil {
				if ctx.Err() == nil {
					yield(Progress{}, err)
				}
				return
			}
			if first || p != last {
				if !yield(p, nil) {
					return
				}
			}
			if !p.Running() {
				return
			}
			last = p
			poll.Reset(cmp.Or(r.FollowPoll, DefaultFollowPoll))
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-poll.C:
			}
			if wait := followGap - time.Since(read); wait > 0 {
				poll.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case <-poll.C:
				}
			}
		}
	}
}

// Ended returns the tenant's batch, whole, for a follower that has seen it
// end: the followers asking within a second of each other share one read.
// The batch returned is shared: it must not be changed.
func (r *BatchRunner) Ended(ctx context.Context, tenant, id string) (*Batch, error) {
	r.init()
	h := &r.hub
	key := [2]string{tenant, id}
	h.mu.Lock()
	rd, ok := h.ended[key]
	if !ok {
		rd = &endedRead{done: make(chan struct{})}
		if h.ended == nil {
			h.ended = map[[2]string]*endedRead{}
		}
		h.ended[key] = rd
		// The read is not the first asker's alone: its going away must
		// not fail the others.
		go func() {
			rd.b, rd.err = r.Store.Batch(context.WithoutCancel(ctx), tenant, id)
			close(rd.done)
			time.AfterFunc(endedShare, func() {
				h.mu.Lock()
				defer h.mu.Unlock()
				delete(h.ended, key)
			})
		}()
	}
	h.mu.Unlock()
	select {
	case <-rd.done:
		return rd.b, rd.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
