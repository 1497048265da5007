package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// FinishLength is the finish reason of an answer cut off at the output
// token limit.
const FinishLength = "length"

func (u *Usage) add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
}

// Total is the input and output tokens together.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// tokenBudget stops the run before a completion once its tokens have
// reached max_llm_tokens: the completion is not requested, unless the
// run may ask for more and is granted it.
func (r *runner) tokenBudget(s *cstep) (*ending, error) {
	for r.maxLLMTokens > 0 && r.usage.Total() >= r.maxLLMTokens {
		limit, used := r.maxLLMTokens, r.usage.Total()
		grant, end, err := r.askBudget(Budget{Limit: LimitLLMTokens, Used: used, Allowed: limit, Grant: r.baseTokens})
		if err != nil || end != nil {
			return end, err
		}
		if grant == 0 {
			return r.tokenLimitReached(s, fmt.Sprintf("max_llm_tokens (%d) reached: the run has used %d tokens", limit, used))
		}
		r.maxLLMTokens += grant
	}
	return nil, nil
}

// tokenLimitReached emits the token_limit_reached step and ends the run
// limit_exceeded.
func (r *runner) tokenLimitReached(s *cstep, reason string) (*ending, error) {
	ev := Event{Action: ActionTokenLimitReached, Kind: KindPlan, Status: StatusLimitExceeded, Model: s.plan.llm.model, Error: reason}
	if err := r.emit(ev); err != nil {
		return nil, err
	}
	return &ending{outcome: OutcomeLimitExceeded, err: reason}, nil
}

// completionFailed ends a plan step whose completion Complete refused.
func (r *runner) completionFailed(s *cstep, err error) (*ending, error) {
	var (
		llmErr    *LLMError
		budgetErr *BudgetError
		stopped   *StoppedError
	)
	switch {
	case errors.As(err, &stopped):
		return r.completionStopped(s, stopped)
	case errors.Is(err, ErrUnrecorded):
		// A replay has no answer to this conversation: the step ends here.
		if s.saveAs != "" {
			r.save(s.saveAs, nil)
		}
		return nil, r.emit(Event{Action: s.action, Kind: KindCompletion, Status: StatusUnrecorded, Model: s.plan.llm.model,
			Error: fmt.Sprintf("completion %d was not recorded for this conversation", r.llmCalls)})
	case r.ctx.Err() != nil:
		return nil, r.ctx.Err()
	case errors.As(err, &budgetErr):
		return r.tokenLimitReached(s, budgetErr.Reason)
	case errors.As(err, &llmErr):
		return r.llmFailed(s, Event{Action: s.action, Kind: KindCompletion, Model: s.plan.llm.model, Usage: &Usage{}}, llmErr.Error())
	}
	return nil, fmt.Errorf("%s (%s): completion %d: %w", s.field, s.action, r.llmCalls, err)
}

// completionStopped emits the event of a completion the run's stop cut
// short, cancelled with the tokens it cost, then stops the run as its
// context says (a replay serving the record ends cancelled there).
func (r *runner) completionStopped(s *cstep, stopped *StoppedError) (*ending, error) {
	usage := stopped.Usage
	r.completions++
	r.usage.add(usage)
	ev := Event{Action: s.action, Kind: KindCompletion, Status: StatusCancelled, Model: s.plan.llm.model,
		Usage: &usage, Error: stopped.Reason}
	if err := r.emit(ev); err != nil {
		return nil, err
	}
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	return &ending{outcome: OutcomeCancelled, err: ev.Error}, nil
}

// llmFailed emits a completion's event with status error and llm_error and
// ends the run failed.
func (r *runner) llmFailed(s *cstep, ev Event, msg string) (*ending, error) {
	ev.Status, ev.ErrorCode, ev.Error = StatusError, ErrorCodeLLM, msg
	if err := r.emit(ev); err != nil {
		return nil, err
	}
	return &ending{outcome: OutcomeFailed, err: fmt.Sprintf("%s (%s): %s", s.field, s.action, msg), errCode: ErrorCodeLLM}, nil
}

// answer checks a final answer (one without calls): the value to save, or
// what is wrong with it; final reports a problem no repair turn can mend.
func (lp *llmParams) answer(content, finish string) (value any, problem string, final bool) {
	switch {
	case finish == FinishLength:
		return nil, "the answer was cut off at the output token limit (finish_reason length): raise max_output_tokens or ask for less", true
	case strings.TrimSpace(content) == "":
		return nil, "the model answered with neither text nor a function call", true
	case lp.schema == nil:
		return content, "", false
	}
	text := jsonText(content)
	v, err := decodeValue([]byte(text))
	obj, _ := v.(map[string]any)
	if err != nil || obj == nil {
		return nil, "the answer is not a JSON object", false
	}
	if msg := schemaProblem(lp.schema, []byte(text)); msg != "" {
		return nil, "the answer does not match output_schema: " + msg, false
	}
	return obj, "", false
}

// jsonText is an answer without the Markdown code fence models often put
// around JSON.
func jsonText(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:]
		}
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	return s
}

// repairPrompt asks the model to mend an answer that failed the schema.
func repairPrompt(problem string) string {
	return "Your answer could not be used: " + problem +
		". Answer again with only the JSON object the JSON Schema in the instructions describes, and no other text."
}

// checkedCall is a call the model asked for, resolved, or the refusal to
// tell it instead of making the call.
type checkedCall struct {
	target  target
	args    map[string]any
	refusal string
}

// checkCalls resolves the calls of an answer against the functions the
// completion offered; problem sums up the invalid ones ("" when none is).
func (pl *cplan) checkCalls(offered []ChatTool, calls []ChatToolCall) ([]checkedCall, string) {
	out := make([]checkedCall, len(calls))
	var problems []string
	for i, tc := range calls {
		var msg string
		out[i], msg = checkCall(pl, offered, tc)
		if msg != "" {
			out[i].refusal = toolError(msg)
			problems = append(problems, msg)
		}
	}
	return out, strings.Join(problems, "; ")
}

func checkCall(pl *cplan, offered []ChatTool, tc ChatToolCall) (checkedCall, string) {
	t, ok := pl.byName[tc.Name]
	if !ok || !slices.ContainsFunc(offered, func(f ChatTool) bool { return f.Name == tc.Name }) {
		return checkedCall{}, fmt.Sprintf("no function named %q was offered: call one of the functions given", tc.Name)
	}
	raw := strings.TrimSpace(tc.Arguments)
	if raw == "" {
		raw = "{}"
	}
	args, err := DecodeArgs([]byte(raw))
	if err != nil || args == nil {
		return checkedCall{}, fmt.Sprintf("the arguments of %s are not a JSON object", tc.Name)
	}
	if msg := pl.llm.argsProblem(tc.Name, t, raw); msg != "" {
		return checkedCall{}, fmt.Sprintf("the arguments of %s do not match its parameters: %s", tc.Name, msg)
	}
	return checkedCall{target: t, args: args}, ""
}
