package workflow

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/telemetry"
)

// ExternalOptions configure the runs of external agents (SPEC §4
// "External agents").
type ExternalOptions struct {
	// PublicURL is the server's public base URL: the gateway URLs an agent
	// is sent start with it.
	PublicURL string
	// HTTP posts to agents: SSRF-checked dialing and trace propagation
	// (outbound.Client's). Required to run external versions.
	HTTP *http.Client
	// Secrets resolves an agent's auth.secrets_ref for its tenant.
	Secrets SecretResolver
	// Relay sends the gateway's model requests to the tenant's models.
	Relay llm.Relayer
	// ApprovalHold bounds how long a gateway call waits for a decision
	// (default 30 s).
	ApprovalHold time.Duration
	// Backoff is the wait before an attempt's retry (default 1 s, doubled
	// each attempt, at most 30 s).
	Backoff time.Duration
}

// SecretResolver reads a secret reference's value for a tenant.
type SecretResolver interface {
	Resolve(ctx context.Context, tenant, ref string) (string, error)
}

// Stable causes of an external run's failure, its error document's
// error_code (docs/external-agents.md lists them).
const (
	// ErrorCodeAgentError: the agent answered 4xx, or 5xx on its last
	// attempt, or an answer that is not one (not JSON, no body, too large).
	ErrorCodeAgentError = "agent_error"
	// ErrorCodeAgentUnreachable: the agent could not be reached, or did
	// not answer in time, on its last attempt.
	ErrorCodeAgentUnreachable = "agent_unreachable"
)

// Kinds and actions of an external run's own steps.
const (
	KindAttempt   = "attempt"
	ActionAttempt = "attempt"
	// ActionCompletion and ActionCall are the actions of the gateway's
	// exchanges.
	ActionCompletion = "completion"
	ActionCall       = "call"
	// StatusSetAside is an attempt whose answer is recorded but not
	// final: a call it made waits for a person.
	StatusSetAside = "set_aside"
)

// maxAgentAnswer bounds an agent's answer.
const maxAgentAnswer = 10 << 20

// defaultApprovalHold and defaultAttemptBackoff are ExternalOptions' defaults.
const (
	defaultApprovalHold   = 30 * time.Second
	defaultAttemptBackoff = time.Second
	maxAttemptBackoff     = 30 * time.Second
)

// executeExternal runs an external agent's workflow: attempts, each a POST
// to the agent while its gateway serves the agent's exchanges, until one
// answers, fails for good or the attempts run out.
func (r *Runner) executeExternal(ctx context.Context, wf *Workflow, v *agent.Version, g *agent.Governance, h history) {
	ctx, cancel := context.WithDeadline(ctx, wf.Deadline)
	defer cancel()
	ctx, span := startInvokeSpan(ctx, wf, len(h.steps), attribute.String("agentplane.external_url", v.External.URL))
	defer span.End()
	store := context.WithoutCancel(ctx)
	// Only this execution's own calls are made: an intent left by an
	// earlier one is the gateway's to judge (see externalRun.interrupted).
	intents := h.pending
	h.intents, h.pending = nil, nil
	j, rec := r.begin(store, wf, h)
	defer j.wait()
	defer func() {
		if v := recover(); v != nil {
			r.crashed(store, wf, j, &panicError{value: v, stack: debug.Stack()})
		}
	}()
	if !r.masking(ctx, wf, j, rec) {
		return
	}
	// The agent is a program of its own, whose work no journal holds
	// back: it is posted to only once the workflow is stored. Start may
	// fail to store it (another invocation took its idempotency key, or a
	// schedule's due time, first): that one's agent runs, not this one's.
	if h.created != nil && h.created.wait() != nil {
		return
	}
	if release, ok := r.versionSlot(ctx, v); ok {
		defer release()
	} else {
		r.conclude(ctx, wf, j, rec, agent.Result{Outcome: OutcomeCancelled, Status: Cancelled}, ctx.Err())
		return
	}
	x := newExternalRun(r, wf, v, g, h, j, rec, intents)
	res, runErr := x.run(ctx)
	if x.waiting && errors.Is(context.Cause(ctx), errCancel) {
		return // ended by Cancel, which took it waiting
	}
	if x.setAside {
		// Stored waiting when the call was held. A decision made since
		// handed the workflow to this replica, running: it is resumed as
		// this execution returns.
		_ = j.wait()
		if now, err := r.opts.Store.Workflow(store, wf.Tenant, wf.ID); err == nil && now.Status == Running && now.Owner == r.opts.Owner {
			r.resumeAfter(now)
		}
		return
	}
	if runErr != nil || res.Status == "" {
		span.SetStatus(codes.Error, "external run")
	}
	r.conclude(ctx, wf, j, rec, res, runErr)
}

// externalRun is the state of one execution of an external workflow.
type externalRun struct {
	r   *Runner
	wf  *Workflow
	v   *agent.Version
	g   *agent.Governance
	j   *journal
	rec *recorder
	in  agent.Input
	// step is the number of the last step, recorded or emitted.
	step int
	// record is what the run recorded, in order: what a new attempt's
	// journal serves again.
	record []recorded
	// intents are steps whose unrepeatable call may have been sent when
	// an earlier execution stopped.
	intents map[int]Intent
	// calls counts the calls sent; tokens the completions' tokens.
	calls  int
	tokens int64
	// made counts the calls sent by their journal key: the occurrence in a
	// write's Idempotency-Key (callDigest).
	made map[string]int
	// completions counts the completions recorded (their numbers).
	completions int
	// limited says why a limit refused an exchange: the outcome is then
	// limit_exceeded whatever the agent answers.
	limited string
	// lastStepAt is when the last step ended: a step's start.
	lastStepAt time.Time
	// approvals are the calls the run asked decisions for; decided, the
	// decisions known, by the step that asked.
	approvals []heldApproval
	decided   map[int]*Approval
	// setAside is set once a call waits past the hold: the workflow waits
	// in the store, and the attempt's later exchanges are refused.
	setAside bool
	// waiting is set while the workflow waits in the store for a
	// decision on a held call: a cancel then ends it (Runner.Cancel).
	waiting bool
	// budgets are the grants and denials of the run's spent budgets.
	budgets budgetState
	// dry, set in a dry-run replay, serves the exchanges from the
	// original's record and keeps the steps instead of storing them.
	dry *dryReplay
}

// recorded is an exchange of the run's record.
type recorded struct {
	kind string // agent.KindCompletion or agent.KindCall
	key  string
	step int
	// A completion's relayed answer, and its api.
	api    string
	answer *llm.RelayResponse
	// A call's answer.
	call agent.CallResult
}

func newExternalRun(r *Runner, wf *Workflow, v *agent.Version, g *agent.Governance, h history, j *journal, rec *recorder, intents []Intent) *externalRun {
	x := &externalRun{r: r, wf: wf, v: v, g: g, j: j, rec: rec, in: wf.Input(), step: len(h.steps),
		intents: map[int]Intent{}, made: map[string]int{}, lastStepAt: r.opts.Now(), decided: map[int]*Approval{}, budgets: newBudgetState()}
	for step, a := range h.approvals {
		if a.Decided() {
			x.decided[step] = a
		}
	}
	byStep := map[int]json.RawMessage{}
	for n, data := range h.completions {
		var head struct {
			Step int `json:"step"`
		}
		if json.Unmarshal(data, &head) == nil {
			byStep[head.Step] = data
		}
		x.completions = max(x.completions, n)
	}
	for i := range h.steps {
		s := &h.steps[i]
		if s.Usage != nil {
			x.tokens += s.InputTokens + s.OutputTokens
		}
		switch {
		case s.Kind == agent.KindCompletion && s.Status == agent.StatusOK:
			if rc, ok := decodeWireCompletion(byStep[s.Step]); ok {
				x.record = append(x.record, recorded{kind: agent.KindCompletion, key: rc.key, step: s.Step, api: rc.api, answer: rc.answer})
			}
		case s.Kind == agent.KindApprove && s.Action == agent.ActionBudgetExhausted:
			x.budgets.replay(s)
		case s.Kind == agent.KindApprove && s.Status == agent.StatusWaitingApproval && s.Tool != "":
			x.approvals = append(x.approvals, heldApproval{key: callKey(s.Tool, s.Operation, s.Args), step: s.Step})
		case s.Kind == agent.KindCall && s.Sent:
			key := callKey(s.Tool, s.Operation, s.Args)
			x.calls++
			x.made[key]++
			if s.Status == agent.StatusOK {
				x.approvedCall(key)
			}
			x.record = append(x.record, recorded{kind: agent.KindCall, key: key, step: s.Step,
				call: agent.CallResult{Status: s.Status, Result: s.Result, Err: s.Error, ErrorCode: s.ErrorCode}})
		}
	}
	for _, in := range intents {
		x.intents[in.Step] = in
	}
	return x
}

// approvedCall notes that a call made before and answered ok (key) used
// the first approval of an identical call that had not let one through, if
// any: each lets one such call through.
func (x *externalRun) approvedCall(key string) {
	for i, ha := range x.approvals {
		if a := x.decided[ha.step]; ha.key == key && !ha.used && a != nil && a.Status == ApprovalApproved {
			x.approvals[i].used = true
			return
		}
	}
}

// limits of the run: the invocation's, else the version's, and what
// approvals granted since.
func (x *externalRun) maxCalls() int {
	return x.baseCalls() + int(x.budgets.granted[agent.LimitToolCalls])
}

func (x *externalRun) maxTokens() int64 {
	if base := x.baseTokens(); base > 0 {
		return base + x.budgets.granted[agent.LimitLLMTokens]
	}
	return 0
}

// baseCalls and baseTokens are the limits the run started with: the
// workflow's, which Start resolved (the invocation's, else the version's),
// but for a replay, started with the original's bound: where that is the
// server's default, the target version's limit replaces it.
func (x *externalRun) baseCalls() int {
	if n := x.g.MaxToolCalls(); n > 0 && x.wf.ReplayOf != "" && x.wf.MaxToolCalls == x.r.opts.DefaultToolCalls {
		return n
	}
	return x.wf.MaxToolCalls
}

func (x *externalRun) baseTokens() int64 {
	if x.wf.MaxLLMTokens > 0 {
		return x.wf.MaxLLMTokens
	}
	return x.g.MaxLLMTokens()
}

// attempts counts the attempts the run made before this execution, and
// the failed ones among them; open reports that the last one has no
// attempt step (its execution stopped), and setAside that it stopped at a
// call waiting for a decision.
func (x *externalRun) attempts() (made, failed int, open, setAside bool) {
	for i := range x.j.steps {
		s := &x.j.steps[i]
		made = max(made, s.Attempt)
		if s.Kind == KindAttempt {
			open = false
			if s.Status == agent.StatusError && s.ErrorCode != ErrorCodeInterrupted {
				failed++
			}
		} else if s.Attempt > 0 {
			open = true
			setAside = s.Kind == agent.KindApprove && s.Status == agent.StatusWaitingApproval
		}
	}
	return made, failed, open, open && setAside
}

// run makes attempts until one ends the run.
func (x *externalRun) run(ctx context.Context) (agent.Result, error) {
	made, failed, open, setAside := x.attempts()
	switch {
	case setAside:
		if err := x.emitAttempt(made, StatusSetAside, nil, "",
			"set aside while a call waited for a person's decision"); err != nil {
			return x.stopped(ctx, err)
		}
	case open:
		// The attempt the last execution made stopped with it.
		if err := x.emitAttempt(made, agent.StatusError, nil, ErrorCodeInterrupted,
			"the server stopped, or another replica took the workflow over, while the attempt ran"); err != nil {
			return x.stopped(ctx, err)
		}
	}
	if err := x.applyDecidedBudget(made + 1); err != nil {
		return x.stopped(ctx, err)
	}
	maxAttempts := x.v.External.Attempts()
	for n := made + 1; ; n++ {
		out := x.attempt(ctx, n)
		if x.setAside {
			// The workflow waits in the store for a decision; a new
			// attempt follows it.
			return agent.Result{Status: agent.WorkflowWaiting}, nil
		}
		if out.err != nil {
			return x.stopped(ctx, out.err)
		}
		if ctx.Err() != nil {
			return x.stopped(ctx, ctx.Err())
		}
		if out.retry {
			failed++
		}
		if err := x.emitAttempt(n, out.status, out.result, out.code, out.detail); err != nil {
			return x.stopped(ctx, err)
		}
		switch {
		case out.final != nil:
			return *out.final, nil
		case failed >= maxAttempts:
			return agent.Result{Outcome: OutcomeFailed, Status: Failed, ErrorCode: out.code,
				Error: fmt.Sprintf("the agent failed %d attempts; the last: %s", failed, out.detail)}, nil
		}
		wait := min(x.backoff()<<(failed-1), maxAttemptBackoff)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return x.stopped(ctx, ctx.Err())
		}
	}
}

func (x *externalRun) backoff() time.Duration {
	if b := x.r.opts.External.Backoff; b > 0 {
		return b
	}
	return defaultAttemptBackoff
}

// stopped is the result of a run its context stopped: cancelled or past
// its deadline ends the workflow; a shutdown or a lost lease leaves it to
// be resumed (conclude reads the cause).
func (x *externalRun) stopped(ctx context.Context, err error) (agent.Result, error) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCancel):
		return agent.Result{Outcome: OutcomeCancelled, Status: Cancelled}, nil
	case errors.Is(cause, context.DeadlineExceeded):
		return agent.Result{Outcome: OutcomeTimedOut, Status: Failed}, nil
	case ctx.Err() != nil:
		return agent.Result{Outcome: OutcomeCancelled, Status: Cancelled}, ctx.Err()
	}
	return agent.Result{}, err
}

// attemptOutcome is how one attempt ended.
type attemptOutcome struct {
	// status and result are the attempt step's; code and detail its
	// error's.
	status string
	result map[string]any
	code   string
	detail string
	// final ends the run; retry counts a failed attempt.
	final *agent.Result
	retry bool
	// err stops the execution (a store failure, the context).
	err error
}

// attempt POSTs to the agent and serves its gateway until it answers.
func (x *externalRun) attempt(ctx context.Context, n int) attemptOutcome {
	ctx, span := tracer.Start(telemetry.WithConversation(ctx, x.wf.ID), "invoke_agent "+x.wf.Agent+" attempt "+strconv.Itoa(n), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", x.wf.Agent),
		attribute.String("gen_ai.conversation.id", x.wf.ID),
		attribute.Int("agentplane.attempt", n)))
	defer span.End()
	a := x.r.gateways.open(x, n)
	defer x.r.gateways.close(a)
	answered := make(chan agentAnswer, 1)
	actx, cancelPost := context.WithCancel(ctx)
	defer cancelPost()
	go func() { answered <- x.post(actx, n, a.token) }()
	a.journal = newJournalCursor(x.record, n > 1)
	for {
		select {
		case ex := <-a.exchanges:
			x.serve(ctx, a, ex)
			if a.err != nil {
				cancelPost()
				<-answered
				return attemptOutcome{err: a.err}
			}
		case ans := <-answered:
			a.end()
			out := x.judge(n, ans)
			if a.journal.served > 0 {
				out.result["journal_served"] = a.journal.served
			}
			return out
		case <-ctx.Done():
			cancelPost()
			<-answered
			a.end()
			return attemptOutcome{err: ctx.Err()}
		}
	}
}

// agentAnswer is what the agent's endpoint answered an attempt.
type agentAnswer struct {
	status int
	body   []byte
	err    error
	// tooLarge reports a body over maxAgentAnswer.
	tooLarge bool
}

// post sends the attempt's request to the agent.
func (x *externalRun) post(ctx context.Context, n int, token string) agentAnswer {
	hc := x.r.opts.External.HTTP
	if hc == nil {
		return agentAnswer{err: errors.New("this server makes no outgoing requests to agents")}
	}
	ext := x.v.External
	base := strings.TrimRight(x.r.opts.External.PublicURL, "/") + "/gateway"
	body := map[string]any{
		"run": map[string]any{"id": x.wf.ID, "attempt": n, "agent": x.wf.Agent, "version": x.wf.AgentVersion,
			"deadline": x.wf.Deadline.UTC().Format(time.RFC3339Nano)},
		"goal": x.wf.Goal, "context": json.RawMessage(x.wf.Context),
		"gateway": map[string]any{"token": token, "openai_base_url": base + "/openai/v1",
			"anthropic_base_url": base + "/anthropic", "mcp_url": base + "/mcp"},
	}
	if replay := x.replayInfo(); replay != nil {
		body["run"].(map[string]any)["replay"] = replay
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return agentAnswer{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ext.URL, bytes.NewReader(raw))
	if err != nil {
		return agentAnswer{err: err}
	}
	// An attempt is posted once. With its Idempotency-Key and a body it
	// can rewind, net/http would post it again by itself when a kept-alive
	// connection breaks before the answer: the same attempt, served live a
	// second time, sending its writes again. A new attempt, with the
	// journal, is what follows a broken connection.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", x.wf.ID+"."+strconv.Itoa(n))
	req.Header.Set("User-Agent", "agentplane")
	if err := x.authenticate(ctx, req); err != nil {
		return agentAnswer{err: err}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return agentAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentAnswer+1))
	if err != nil {
		return agentAnswer{status: resp.StatusCode, err: err}
	}
	return agentAnswer{status: resp.StatusCode, body: b, tooLarge: len(b) > maxAgentAnswer}
}

// authenticate applies the version's auth to a request to the agent.
func (x *externalRun) authenticate(ctx context.Context, req *http.Request) error {
	a := x.v.External.Auth
	if a == nil || a.Type == "" || a.Type == agent.ExternalAuthNone {
		return nil
	}
	res := x.r.opts.External.Secrets
	if res == nil {
		return fmt.Errorf("auth %s: no secrets resolver is configured", a.Type)
	}
	secret, err := res.Resolve(ctx, x.wf.Tenant, a.SecretsRef)
	if err != nil {
		// The resolver's errors name the reference, never the value.
		return fmt.Errorf("auth %s: %w", a.Type, err)
	}
	switch a.Type {
	case agent.ExternalAuthBearer:
		req.Header.Set("Authorization", "Bearer "+secret)
	case agent.ExternalAuthAPIKey:
		h := a.Header
		if h == "" {
			h = "X-API-Key"
		}
		req.Header.Set(h, secret)
	}
	return nil
}

// judge turns the agent's answer into the attempt's outcome.
func (x *externalRun) judge(n int, ans agentAnswer) attemptOutcome {
	result := map[string]any{"attempt": n}
	if ans.status != 0 {
		result["http_status"] = ans.status
	}
	fail := func(code, detail string) attemptOutcome {
		res := agent.Result{Outcome: OutcomeFailed, Status: Failed, ErrorCode: code, Error: detail}
		if x.limited != "" {
			// A limit refused the agent, which then failed: the run ends
			// there, as another attempt would meet the same limit.
			res = agent.Result{Outcome: OutcomeLimitExceeded, Status: Completed, Error: x.limited}
		}
		return attemptOutcome{status: agent.StatusError, result: result, code: code, detail: detail, final: &res}
	}
	retry := func(code, detail string) attemptOutcome {
		if x.limited != "" {
			return fail(code, detail)
		}
		return attemptOutcome{status: agent.StatusError, result: result, code: code, detail: detail, retry: true}
	}
	switch {
	case ans.err != nil && ans.status == 0:
		return retry(ErrorCodeAgentUnreachable, "the agent could not be reached: "+x.rec.maskText(ans.err.Error()))
	case ans.err != nil:
		return retry(ErrorCodeAgentUnreachable, fmt.Sprintf("the agent's answer (%d) was cut off: %v", ans.status, ans.err))
	case ans.status >= 500:
		return retry(ErrorCodeAgentError, fmt.Sprintf("the agent answered %d: %s", ans.status, clipText(x.rec.maskText(string(ans.body)))))
	case ans.status >= 400:
		return fail(ErrorCodeAgentError, fmt.Sprintf("the agent answered %d: %s", ans.status, clipText(x.rec.maskText(string(ans.body)))))
	case ans.status != http.StatusOK:
		return fail(ErrorCodeAgentError, fmt.Sprintf("the agent answered %d; an agent answers 200 with {output, outcome} when it is done", ans.status))
	case ans.tooLarge:
		return fail(ErrorCodeAgentError, fmt.Sprintf("the agent's answer is over %d MiB", maxAgentAnswer>>20))
	case len(bytes.TrimSpace(ans.body)) == 0:
		return fail(ErrorCodeAgentError, "the agent answered 200 without a body; an agent answers {\"output\": …, \"outcome\": \"answered\"} when it is done")
	}
	var a struct {
		Output  json.RawMessage `json:"output"`
		Outcome *string         `json:"outcome"`
	}
	if err := json.Unmarshal(ans.body, &a); err != nil {
		return fail(ErrorCodeAgentError, "the agent's answer is not a JSON object: "+clipText(x.rec.maskText(string(ans.body))))
	}
	outcome := "answered"
	if a.Outcome != nil {
		outcome = *a.Outcome
		if !agent.IsSlug(outcome) {
			return fail(ErrorCodeAgentError, fmt.Sprintf("the agent's outcome %q is not a slug (lower-case letters, digits, _ and -)", clipText(outcome)))
		}
	}
	result["outcome"] = outcome
	res := agent.Result{Outcome: outcome, Status: agent.WorkflowStatus(outcome)}
	if len(a.Output) > 0 && string(a.Output) != "null" {
		var out any
		if err := json.Unmarshal(a.Output, &out); err == nil {
			res.Output = out
		}
	}
	if x.limited != "" {
		res.Outcome, res.Status, res.Error = OutcomeLimitExceeded, Completed, x.limited
		result["outcome"] = OutcomeLimitExceeded
	}
	return attemptOutcome{status: agent.StatusOK, result: result, final: &res}
}

// clipText shortens an agent's words for a step or an error document.
func clipText(s string) string {
	const most = 2000
	if len(s) <= most {
		return s
	}
	for i := most; i > most-4 && i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return s[:most] + "…"
}

// emitAttempt records the step of an attempt's end.
func (x *externalRun) emitAttempt(n int, status string, result map[string]any, code, detail string) error {
	ev := agent.Event{Action: ActionAttempt, Kind: KindAttempt, Status: status, Error: detail, ErrorCode: code}
	if result != nil {
		ev.Result, _ = json.Marshal(result)
	}
	return x.emit(ev, n, "")
}

// emit records an event as the run's next step, stored before anything
// follows it: a write's answer reaches the agent only once its step is.
func (x *externalRun) emit(ev agent.Event, attempt int, journal string) error {
	if err := x.note(ev, attempt, journal, nil); err != nil {
		return err
	}
	if x.dry != nil {
		return nil
	}
	return x.j.flush()
}

// note records an event as the run's next step, with the completion c
// records (if any), written in the background: a read or a completion may
// be made again, so its answer need not wait for its step. Every step is
// stored before a write is sent, a write's answer and the attempt's end.
// A dry run keeps its steps instead (emitDry).
func (x *externalRun) note(ev agent.Event, attempt int, journal string, c *Completion) error {
	if x.dry != nil {
		x.emitDry(ev, attempt)
		return nil
	}
	x.step++
	ev.Step = x.step
	s, recs := x.rec.step(ev)
	s.Attempt, s.Journal = attempt, journal
	if err := x.j.add(s, recs, c); err != nil {
		return err
	}
	return x.j.release()
}

// randomToken is a new run token.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "apr_" + base64.RawURLEncoding.EncodeToString(b)
}

// gateways are the attempts running on this replica, by their tokens'
// digests: a token is never kept itself.
type gateways struct {
	mu      sync.Mutex
	byToken map[[32]byte]*attemptGateway
}

// attemptGateway is the gateway of one attempt.
type attemptGateway struct {
	x       *externalRun
	attempt int
	token   string
	digest  [32]byte
	// exchanges are the agent's requests, served one at a time by the
	// execution.
	exchanges chan *exchange
	journal   *journalCursor
	// done is closed when the attempt ends; later exchanges are refused.
	done     chan struct{}
	doneOnce sync.Once
	// err stops the execution (a failure to store).
	err error
}

func (g *gateways) open(x *externalRun, attempt int) *attemptGateway {
	token := randomToken()
	a := &attemptGateway{x: x, attempt: attempt, token: token, digest: sha256.Sum256([]byte(token)),
		exchanges: make(chan *exchange), done: make(chan struct{})}
	g.mu.Lock()
	if g.byToken == nil {
		g.byToken = map[[32]byte]*attemptGateway{}
	}
	g.byToken[a.digest] = a
	g.mu.Unlock()
	return a
}

func (g *gateways) close(a *attemptGateway) {
	a.end()
	g.mu.Lock()
	delete(g.byToken, a.digest)
	g.mu.Unlock()
}

func (g *gateways) lookup(token string) *attemptGateway {
	d := sha256.Sum256([]byte(token))
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byToken[d]
}

// end refuses the attempt's later exchanges.
func (a *attemptGateway) end() { a.doneOnce.Do(func() { close(a.done) }) }

// versionSlot waits for one of the version's max_concurrency slots on this
// replica (none to wait for without a bound); false when ctx ended first.
func (r *Runner) versionSlot(ctx context.Context, v *agent.Version) (release func(), ok bool) {
	n := v.External.MaxConcurrency
	if n <= 0 {
		return func() {}, true
	}
	key := v.Tenant + "/" + v.Ref()
	r.mu.Lock()
	if r.versionSlots == nil {
		r.versionSlots = map[string]chan struct{}{}
	}
	slots := r.versionSlots[key]
	if slots == nil || cap(slots) != n {
		slots = make(chan struct{}, n)
		r.versionSlots[key] = slots
	}
	r.mu.Unlock()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, true
	case <-ctx.Done():
		return nil, false
	}
}
