package replay

import (
	"bytes"
	"context"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
	"github.com/pkg/diff/myers"
)

// actions pairs two step lists for the alignment: steps are equal when
// their actions are.
type actions struct{ a, b []workflow.Step }

func (p actions) LenA() int                                        { return len(p.a) }
func (p actions) LenB() int                                        { return len(p.b) }
func (p actions) Equal(ai, bi int) bool                            { return p.a[ai].Action == p.b[bi].Action }
func (p actions) pair(ai, bi int) (*workflow.Step, *workflow.Step) { return &p.a[ai], &p.b[bi] }

// Diff aligns the original and the replay steps by a longest common
// subsequence of their actions (Myers' algorithm: O((N+M)·D) time for N and
// M steps of which D are added or removed, so linear when the runs mostly
// agree) and counts what changed. Aligned pairs that differ in tool,
// operation, canonical args, status, score, queue or result are changed;
// unaligned replay steps are added, unaligned original steps removed (the
// removed ones of a region first). Completion steps align by action like
// the others; a pair of them also differs in model or finish reason (their
// token counts are not compared). A pair of which one call a fault
// answered and the other not is changed too (field injected). An external
// agent's calls between two completions pair by their calls, in any order
// (pairCalls). The same inputs always align the same way.
func Diff(original, replayed []workflow.Step) ([]Entry, Delta) {
	p := actions{original, replayed}
	script := myers.Diff(context.Background(), p)
	entries := make([]Entry, 0, max(len(original), len(replayed)))
	var d Delta
	for _, r := range script.Ranges {
		switch {
		case r.IsEqual():
			order := pairCalls(original[r.LowA:r.HighA], replayed[r.LowB:r.HighB])
			for i := range r.HighA - r.LowA {
				o, n := p.pair(r.LowA+order[i], r.LowB+i)
				fields := changedFields(o, n)
				e := Entry{Kind: Same, Original: o, Replay: n}
				if len(fields) > 0 {
					e.Kind, e.Fields = Changed, fields
					d.StepsChanged++
					if (hasCall(o) || hasCall(n)) && callsDiffer(o, n) {
						d.ToolCallsChanged++
					}
				}
				entries = append(entries, e)
			}
		default:
			for i := r.LowA; i < r.HighA; i++ {
				entries = append(entries, Entry{Kind: Removed, Original: &original[i]})
				d.StepsRemoved++
				if hasCall(&original[i]) {
					d.ToolCallsChanged++
				}
			}
			for i := r.LowB; i < r.HighB; i++ {
				entries = append(entries, Entry{Kind: Added, Replay: &replayed[i]})
				d.StepsAdded++
				if hasCall(&replayed[i]) {
					d.ToolCallsChanged++
				}
			}
		}
	}
	return entries, d
}

// pairCalls pairs the steps of two aligned ranges, of equal length: the
// replay's i-th step with the original's order[i]-th. Steps pair in place,
// except an external agent's calls between two of its completions: a
// framework may make a model's parallel tool calls in any order (the
// gateway takes them as they come), so such a run of calls pairs each
// replay call with an original call identical to it (tool, operation,
// canonical args) where there is one, and the rest in their order (the
// Myers alignment pairs steps of one action, and so does a run). Calls a
// defined agent makes keep their places: their order is the agent's.
func pairCalls(original, replayed []workflow.Step) []int {
	order := make([]int, len(replayed))
	for i := range order {
		order[i] = i
	}
	for start := 0; start < len(order); {
		end := start
		for end < len(order) && externalCall(&original[end]) && externalCall(&replayed[end]) &&
			original[end].Action == original[start].Action {
			end++
		}
		if end-start > 1 {
			matchCalls(original[start:end], replayed[start:end], order[start:end], start)
		}
		start = max(end, start+1)
	}
	return order
}

// matchCalls fills order (offset by base) for a run of calls: identical
// calls first, each original used once, then the rest in their order.
func matchCalls(original, replayed []workflow.Step, order []int, base int) {
	used := make([]bool, len(original))
	paired := make([]bool, len(replayed))
	for i := range replayed {
		for k := range original {
			if !used[k] && sameCall(&original[k], &replayed[i]) {
				used[k], paired[i], order[i] = true, true, base+k
				break
			}
		}
	}
	k := 0
	for i := range replayed {
		if paired[i] {
			continue
		}
		for used[k] {
			k++
		}
		used[k], order[i] = true, base+k
	}
}

// externalCall reports whether a step is a call an external agent made
// through the gateway.
func externalCall(s *workflow.Step) bool { return s.Attempt > 0 && s.Kind == agent.KindCall }

// sameCall reports whether two steps make the same call: tool, operation
// and canonical args.
func sameCall(a, b *workflow.Step) bool {
	return a.Tool == b.Tool && a.Operation == b.Operation && sameJSON(a.Args, b.Args)
}

// hasCall reports whether a step names an operation, made or not.
func hasCall(s *workflow.Step) bool { return s.Operation != "" }

// callsDiffer reports whether two steps' calls differ: tool, operation,
// canonical args or status.
func callsDiffer(a, b *workflow.Step) bool {
	return a.Tool != b.Tool || a.Operation != b.Operation || !sameJSON(a.Args, b.Args) || a.Status != b.Status
}

// changedFields names the compared fields in which two aligned steps differ.
func changedFields(a, b *workflow.Step) []string {
	var f []string
	if a.Tool != b.Tool {
		f = append(f, "tool")
	}
	if a.Operation != b.Operation {
		f = append(f, "operation")
	}
	if !sameJSON(a.Args, b.Args) {
		f = append(f, "args")
	}
	if a.Status != b.Status {
		f = append(f, "status")
	}
	if !sameScore(a.Score, b.Score) {
		f = append(f, "score")
	}
	if a.Queue != b.Queue {
		f = append(f, "queue")
	}
	if !sameJSON(a.Result, b.Result) {
		f = append(f, "result")
	}
	if a.Model != b.Model {
		f = append(f, "model")
	}
	if a.FinishReason != b.FinishReason {
		f = append(f, "finish_reason")
	}
	if (a.Injected == nil) != (b.Injected == nil) {
		f = append(f, "injected")
	}
	return f
}

func sameScore(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// sameJSON compares two JSON values in canonical form
// (workflow.CanonicalJSON); absent and null are the same, and so are two
// values that do not parse but are byte-equal.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if isNull(a) || isNull(b) {
		return isNull(a) && isNull(b)
	}
	ca, errA := workflow.CanonicalJSON(a)
	cb, errB := workflow.CanonicalJSON(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

func isNull(b []byte) bool {
	return len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null"
}
