package workflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
)

// journal stores an execution's steps, each as soon as it can without
// holding the execution up:
//
//   - The newest step is held until the execution next acts or ends, so a
//     workflow's last step and its end cost one commit.
//   - Before a read, the held step is released: written in the background
//     while the read is made. A step released while a write is in flight
//     waits for the execution's next release (or its end) to go with the
//     step released then, one commit for both, or is written on its own
//     once that write has been done for stepLinger. A read is safe to make
//     again, so it need not wait for the steps before it.
//   - Before a write or a planner request, every step is stored first; so
//     is every step before a read when one of them carries a completion
//     (a defined agent's: see beforeRead).
//   - The steps not yet written at the end are stored with it.
//   - A new workflow's own storing, under way in Start as the execution
//     begins, is the first write in flight: every write waits for it.
//
// A step is visible (to followers, who read the store) only once stored,
// and it is stored before any write or planner request that follows it.
type journal struct {
	r   *Runner
	wf  *Workflow
	ctx context.Context // the store's: not cancelled with the execution
	// newest is the step held until the execution next acts or ends; only
	// the execution touches it.
	newest *StepWrite

	mu sync.Mutex
	// queued are released steps not yet being written, oldest first.
	queued []StepWrite
	// linger writes the queued steps once no write has been in flight for
	// stepLinger (lingerFor in tests); nil when not set.
	linger    *time.Timer
	lingerFor time.Duration
	// writing is closed when the write in flight ends; nil when none is.
	writing chan struct{}
	steps   []Step // stored, the history's included
	// answers are the completions carried by steps added and not yet
	// stored.
	answers int
	// counted are the tokens and cost of every completion added, when the
	// execution began with the workflow (nil for a resume, whose earlier
	// completions it does not hold): its end carries their sum.
	counted []Completion
	err     error // the first failure to store; the execution stops
}

// add holds s, with the completion c it records (if any), releasing the
// step held before it.
func (j *journal) add(s *Step, recs []*audit.Record, c *Completion) error {
	err := j.release()
	j.newest = &StepWrite{Step: s, Records: recs, Completion: c}
	if c != nil {
		j.mu.Lock()
		j.answers++
		j.mu.Unlock()
		if j.counted != nil {
			j.counted = append(j.counted, Completion{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
				Cost: c.Cost, Currency: c.Currency})
		}
	}
	return err
}

// usage is the sum of the workflow's completions when the journal counted
// all of them, else nil. Once take has returned, every one is stored or
// among the last steps.
func (j *journal) usage() *CompletionTotals {
	if j.counted == nil {
		return nil
	}
	t := TotalCompletions(j.counted)
	return &t
}

// beforeRead readies the journal for a read to be sent: the held step is
// released, and when a step not yet stored carries a completion, every
// step is stored first. A read may be sent again after a crash, but a
// completion once answered is recorded and never asked again (SPEC §4,
// "Calls to models"): so a completion costs no commit of its own, yet a
// crash during a later read finds it stored.
func (j *journal) beforeRead() error {
	j.mu.Lock()
	answers := j.answers
	j.mu.Unlock()
	if answers > 0 {
		return j.flush()
	}
	return j.release()
}

// release queues the held step to be written in the background; it
// returns the failure of an earlier write, if any.
func (j *journal) release() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.newest != nil && j.err == nil {
		j.queued = append(j.queued, *j.newest)
		if j.writing == nil {
			j.writeQueued()
		}
	}
	j.newest = nil
	return j.err
}

// writeQueued writes the queued steps in the background. j.mu is held.
func (j *journal) writeQueued() {
	j.stopLinger()
	batch := j.queued
	j.queued = nil
	j.inFlight(func() error {
		if err := j.r.opts.Store.AppendSteps(j.ctx, j.r.opts.Owner, batch...); err != nil {
			return fmt.Errorf("store steps %d to %d: %w", batch[0].Step.Step, batch[len(batch)-1].Step.Step, err)
		}
		return nil
	}, batch)
}

// inFlight runs write in the background as the write in flight, then
// writes what was queued meanwhile; steps are what write stores. j.mu is
// held.
func (j *journal) inFlight(write func() error, steps []StepWrite) {
	done := make(chan struct{})
	j.writing = done
	go func() {
		err := guard(write)
		if err == nil && len(steps) > 0 {
			j.r.hub.notify(j.wf.ID)
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		defer close(done)
		j.writing = nil
		if err != nil {
			j.failLocked(err)
			return
		}
		for _, sw := range steps {
			j.steps = append(j.steps, *sw.Step)
			if sw.Completion != nil {
				j.answers--
			}
		}
		if len(j.queued) > 0 && j.linger == nil {
			j.linger = time.AfterFunc(cmp.Or(j.lingerFor, stepLinger), j.lingered)
		}
	}()
}

// stepLinger is how long steps released while a write was in flight wait,
// once it is done, for the execution's next release to be written with.
const stepLinger = time.Millisecond

// lingered writes the steps still queued once the linger has passed.
func (j *journal) lingered() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.linger = nil
	if j.writing == nil && len(j.queued) > 0 && j.err == nil {
		j.writeQueued()
	}
}

// stopLinger cancels the linger: the queued steps are being written or
// taken. j.mu is held.
func (j *journal) stopLinger() {
	if j.linger != nil {
		j.linger.Stop()
		j.linger = nil
	}
}

// wait returns once no write is in flight, with the first failure to store.
func (j *journal) wait() error {
	for {
		j.mu.Lock()
		w, err := j.writing, j.err
		j.mu.Unlock()
		if w == nil {
			return err
		}
		<-w
	}
}

// flush stores every step, the held one included.
func (j *journal) flush() error {
	j.release()
	for {
		if err := j.wait(); err != nil {
			return err
		}
		j.mu.Lock()
		if len(j.queued) == 0 || j.err != nil {
			err := j.err
			j.mu.Unlock()
			return err
		}
		if j.writing == nil {
			j.writeQueued()
		}
		j.mu.Unlock()
	}
}

// take returns the steps not yet written, to be stored with the
// execution's end, once no write is in flight; stored are the steps
// stored before them.
func (j *journal) take() (stored []Step, last []StepWrite, err error) {
	j.mu.Lock()
	j.stopLinger()
	last, j.queued = j.queued, nil
	j.mu.Unlock()
	if j.newest != nil {
		last, j.newest = append(last, *j.newest), nil
	}
	err = j.wait()
	return j.steps, last, err
}

// fail stops the execution on a failure to store, leaving the workflow to
// be resumed from what was stored; it returns err.
func (j *journal) fail(err error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failLocked(err)
	return err
}

// failLocked is fail with j.mu held. A workflow Start failed to store is
// not logged here: Start reports it.
func (j *journal) failLocked(err error) {
	if j.err != nil {
		return
	}
	j.err = err
	// A panic is logged as the execution ends its workflow (see crashed).
	if !errors.Is(err, errNotCreated) && panicked(err) == nil {
		j.r.opts.Logger.Error("workflow write failed; leaving the workflow to be resumed", "workflow_id", j.wf.ID, "err", err)
	}
}
