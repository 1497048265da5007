package workflow

import (
	"context"
	"encoding/json"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/fault"
)

// followPoll is how often a follower re-reads the store while the store's
// change feed is down: the path by which a workflow running on another
// replica then reaches a follower here.
const followPoll = 200 * time.Millisecond

// localPoll is how often, at most, a follower re-reads a store without a
// change feed (SQLite: one process, so every write is made here and wakes
// the follower through the hub): only a safety net, slow enough that a
// thousand idle followers cost the store under a hundred reads a second.
const localPoll = 30 * time.Second

// hub wakes local followers of a workflow when its history grows.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*sub]struct{}
}

type sub struct {
	c chan struct{}
	// end is how the workflow ended, when it ended on this replica while
	// subscribed.
	end atomic.Pointer[ending]
}

// ending is a workflow as this replica finished it, with all its steps
// (nil when they were not at hand).
type ending struct {
	wf    *Workflow
	steps []Step
}

func newHub() *hub { return &hub{subs: map[string]map[*sub]struct{}{}} }

func (h *hub) subscribe(id string) *sub {
	s := &sub{c: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.subs[id] == nil {
		h.subs[id] = map[*sub]struct{}{}
	}
	h.subs[id][s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(id string, s *sub) {
	h.mu.Lock()
	delete(h.subs[id], s)
	if len(h.subs[id]) == 0 {
		delete(h.subs, id)
	}
	h.mu.Unlock()
}

func (h *hub) notify(id string) {
	h.mu.Lock()
	for s := range h.subs[id] {
		s.wake()
	}
	h.mu.Unlock()
}

// notifyAll wakes every local follower.
func (h *hub) notifyAll() {
	h.mu.Lock()
	for _, subs := range h.subs {
		for s := range subs {
			s.wake()
		}
	}
	h.mu.Unlock()
}

// finish hands e to the workflow's local subscribers and wakes them.
func (h *hub) finish(id string, e *ending) {
	h.mu.Lock()
	for s := range h.subs[id] {
		s.end.Store(e)
		s.wake()
	}
	h.mu.Unlock()
}

// wake makes the subscriber's next wait return at once.
func (s *sub) wake() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// wait returns on a notification, after poll (never when poll is 0), or
// with ctx's error.
func (s *sub) wait(ctx context.Context, poll time.Duration) error {
	var expired <-chan time.Time
	if poll > 0 {
		t := time.NewTimer(poll)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-s.c:
	case <-expired:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Event is one server-sent event of a workflow: its id and one-line JSON.
type Event struct {
	ID   int
	Data json.RawMessage
}

// stepEvent is a step as the stream shows it (SPEC §4 Invoke).
type stepEvent struct {
	Event     string   `json:"event"`
	Step      int      `json:"step"`
	Agent     string   `json:"agent"`
	Action    string   `json:"action"`
	Status    string   `json:"status"`
	Tool      string   `json:"tool,omitempty"`
	Operation string   `json:"operation,omitempty"`
	Score     *float64 `json:"score,omitempty"`
	Queue     string   `json:"queue,omitempty"`
	Outcome   string   `json:"outcome,omitempty"`
	Error     string   `json:"error,omitempty"`
	// Reason and Approval belong to approve steps: why a decision is
	// asked, and the decision (who, when, comment, timed out).
	Reason   string          `json:"reason,omitempty"`
	Approval json.RawMessage `json:"approval,omitempty"`
	// A completion's model, tokens, finish reason and error code.
	Model string `json:"model,omitempty"`
	*agent.Usage
	FinishReason string `json:"finish_reason,omitempty"`
	ErrorCode    string `json:"error_code,omitempty"`
	// Injected says a replay's fault answered the step's call.
	Injected *fault.Injected `json:"injected,omitempty"`
}

// completeEvent ends every stream.
type completeEvent struct {
	Event      string          `json:"event"`
	WorkflowID string          `json:"workflow_id"`
	Outcome    string          `json:"outcome"`
	Status     string          `json:"status"`
	DurationMS int64           `json:"duration_ms"`
	Error      json.RawMessage `json:"error,omitempty"`
	// Output is the agent's output expression's value, when it has one.
	Output json.RawMessage `json:"output,omitempty"`
}

// StepView is a step as streams and sync invokes show it.
func StepView(agentName string, s Step) any {
	v := stepEvent{Event: "step", Step: s.Step, Agent: agentName, Action: s.Action, Status: s.Status,
		Tool: s.Tool, Operation: s.Operation, Score: s.Score, Queue: s.Queue, Outcome: s.Outcome, Error: s.Error,
		Reason: s.Reason, Model: s.Model, Usage: s.Usage, FinishReason: s.FinishReason, ErrorCode: s.ErrorCode, Injected: s.Injected}
	if s.Kind == agent.KindApprove && s.Status != agent.StatusWaitingApproval {
		v.Approval = s.Result
	}
	return v
}

// CompleteView is the complete event of a finished workflow.
func CompleteView(wf *Workflow) any {
	return completeEvent{Event: "complete", WorkflowID: wf.ID, Outcome: wf.Outcome, Status: wf.Status,
		DurationMS: wf.DurationMS(wf.FinishedAt), Error: wf.Error, Output: wf.Output}
}

// DurationMS is how long the workflow ran, or has run by now.
func (w *Workflow) DurationMS(now time.Time) int64 {
	end := w.FinishedAt
	if end.IsZero() {
		end = now
	}
	return end.Sub(w.StartedAt).Milliseconds()
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// Follow yields the workflow's events after afterID, live while it runs,
// ending with its complete event. Events come only from the store, so a
// follower on any replica sees exactly what was recorded.
func (r *Runner) Follow(ctx context.Context, tenant, id string, afterID int) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		last := afterID
		lastStep := 0 // the highest step id sent by this follow
		for {
			s := r.hub.subscribe(id)
			wf, err := r.opts.Store.Workflow(ctx, tenant, id)
			if err != nil {
				r.hub.unsubscribe(id, s)
				yield(Event{}, err)
				return
			}
			// Steps are stored before the end, so read them after the
			// workflow: a finished workflow's steps are all there.
			steps, err := r.opts.Store.Steps(ctx, id, last)
			if err != nil {
				r.hub.unsubscribe(id, s)
				yield(Event{}, err)
				return
			}
			for _, st := range steps {
				if !yield(Event{ID: st.Seq, Data: mustJSON(StepView(wf.Agent, st))}, nil) {
					r.hub.unsubscribe(id, s)
					return
				}
				last, lastStep = st.Seq, st.Seq
			}
			if wf.Done() {
				r.hub.unsubscribe(id, s)
				total, err := r.stepTotal(ctx, id, lastStep, afterID)
				if err != nil {
					yield(Event{}, err)
					return
				}
				if complete := total + 1; complete > afterID {
					yield(Event{ID: complete, Data: mustJSON(CompleteView(wf))}, nil)
				}
				return
			}
			err = s.wait(ctx, r.feed.poll())
			r.hub.unsubscribe(id, s)
			if err != nil {
				yield(Event{}, err)
				return
			}
		}
	}
}

// stepTotal is the number of steps of a finished workflow, given the
// highest step a follow sent (0 for none) after afterID.
func (r *Runner) stepTotal(ctx context.Context, id string, lastStep, afterID int) (int, error) {
	if lastStep > 0 || afterID == 0 {
		return lastStep, nil
	}
	// Nothing was sent: is the event the client saw last a step?
	steps, err := r.opts.Store.Steps(ctx, id, afterID-1)
	if err != nil {
		return 0, err
	}
	if len(steps) > 0 {
		return steps[len(steps)-1].Seq, nil
	}
	return afterID - 1, nil
}
