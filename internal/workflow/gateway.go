package workflow

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
)

// GatewayRun is an attempt of an external agent as its run gateway sees
// it: what the agent may use, and its exchanges, each made and recorded
// by the workflow's execution.
type GatewayRun struct{ a *attemptGateway }

// Gateway finds the running attempt a run token was issued to; false when
// no attempt running here has it (unknown, an ended attempt's, a finished
// workflow's).
func (r *Runner) Gateway(token string) (*GatewayRun, bool) {
	a := r.gateways.lookup(token)
	if a == nil {
		return nil, false
	}
	select {
	case <-a.done:
		return nil, false
	default:
	}
	return &GatewayRun{a: a}, true
}

// Tenant is the tenant the run belongs to.
func (g *GatewayRun) Tenant() string { return g.a.x.wf.Tenant }

// WorkflowID is the run's workflow.
func (g *GatewayRun) WorkflowID() string { return g.a.x.wf.ID }

// Attempt numbers the attempt.
func (g *GatewayRun) Attempt() int { return g.a.attempt }

// Caller is who invoked the run.
func (g *GatewayRun) Caller() Caller { return g.a.x.wf.Caller }

// Agent is the run's agent version, name@version.
func (g *GatewayRun) Agent() string { return g.a.x.wf.Agent + "@" + g.a.x.wf.AgentVersion }

// Operations are the operations the run's tools offer.
func (g *GatewayRun) Operations() []agent.GatewayOperation { return g.a.x.g.Operations() }

// Models are the model names the run may use.
func (g *GatewayRun) Models() []string { return g.a.x.g.Models() }

// GatewayError refuses an exchange: the status and words the gateway
// answers with, in the provider's shape or as an MCP error result.
type GatewayError struct {
	Status  int
	Code    string
	Message string
}

func (e *GatewayError) Error() string { return e.Message }

// Codes of the gateway's refusals (docs/external-agents.md).
const (
	GatewayRunEnded        = "run_ended"
	GatewayRunWaiting      = "run_waiting"
	GatewayModelNotAllowed = "model_not_allowed"
	GatewayLimitExceeded   = "limit_exceeded"
	GatewayUpstreamError   = "upstream_error"
	GatewayInvalidRequest  = "invalid_request"
	GatewayUnavailable     = "unavailable"
)

// errRunEnded refuses an exchange of an attempt that ended meanwhile.
var errRunEnded = &GatewayError{Status: http.StatusUnauthorized, Code: GatewayRunEnded,
	Message: "this run token is no longer valid: its attempt or its workflow has ended"}

// exchange is one request of the agent, made by the execution.
type exchange struct {
	kind string // agent.KindCompletion or agent.KindCall
	// ctx is the agent's request's: a completion's request to the model
	// ends with it.
	ctx context.Context
	// A completion's request: its API, body and headers to pass on, and
	// where a streamed answer's events go.
	api    string
	body   []byte
	header http.Header
	send   func([]byte) error
	// A call's operation and arguments.
	op   agent.GatewayOperation
	args map[string]any

	done chan struct{}
	// What the execution answered.
	answer *llm.RelayResponse
	call   CallAnswer
	err    error
}

// CallAnswer is a gateway call's result: the tool's answer, or why there
// is none (IsError, with Message).
type CallAnswer struct {
	Result  json.RawMessage
	IsError bool
	Message string
	// Journal reports an answer served from the run's record.
	Journal bool
}

// submit hands an exchange to the execution and waits for its answer.
func (a *attemptGateway) submit(ctx context.Context, ex *exchange) error {
	ex.done = make(chan struct{})
	select {
	case a.exchanges <- ex:
	case <-a.done:
		return errRunEnded
	case <-ctx.Done():
		return ctx.Err()
	}
	<-ex.done
	return ex.err
}

// Complete relays a model request of the agent (api is llm.ChatCompletions,
// llm.Responses or llm.Messages), streaming a streamed answer's events to
// send as they arrive. The answer may be the provider's error; a refusal
// of the gateway's own is a *GatewayError.
func (g *GatewayRun) Complete(ctx context.Context, api string, body []byte, header http.Header, send func([]byte) error) (*llm.RelayResponse, error) {
	ex := &exchange{ctx: ctx, kind: agent.KindCompletion, api: api, body: body, header: header, send: send}
	if err := g.a.submit(ctx, ex); err != nil {
		return nil, err
	}
	return ex.answer, nil
}

// Call makes a tool call of the agent by its gateway name.
func (g *GatewayRun) Call(ctx context.Context, name string, args map[string]any) (CallAnswer, error) {
	op, ok := g.a.x.g.Operation(name)
	if !ok {
		return CallAnswer{IsError: true, Message: fmt.Sprintf("no operation %q is offered to this agent: tools/list lists those that are", name)}, nil
	}
	if args == nil {
		args = map[string]any{}
	}
	ex := &exchange{kind: agent.KindCall, op: op, args: args}
	if err := g.a.submit(ctx, ex); err != nil {
		return CallAnswer{}, err
	}
	return ex.call, nil
}

// serve makes one exchange and answers it.
func (x *externalRun) serve(ctx context.Context, a *attemptGateway, ex *exchange) {
	defer close(ex.done)
	if x.setAside {
		// The workflow waits for a decision: nothing more is recorded.
		const waiting = "the run waits for a person's decision and this attempt is set aside: answer now; agentplane starts a new attempt after the decision"
		if ex.kind == agent.KindCall {
			ex.call = CallAnswer{IsError: true, Message: waiting}
		} else {
			ex.err = &GatewayError{Status: http.StatusConflict, Code: GatewayRunWaiting, Message: waiting}
		}
		return
	}
	var err error
	switch {
	case x.dry != nil:
		err = x.serveDry(ctx, a, ex)
	case ex.kind == agent.KindCompletion:
		ex.answer, err = x.complete(ctx, a, ex)
	case ex.kind == agent.KindCall:
		ex.call, err = x.call(ctx, a, ex)
	}
	var ge *GatewayError
	switch {
	case err == nil:
	case errors.As(err, &ge):
		ex.err = ge
	default:
		// A failure to store, or the execution stopping: the attempt ends.
		a.err = err
		ex.err = &GatewayError{Status: http.StatusServiceUnavailable, Code: GatewayUnavailable,
			Message: "the run stopped while this request was made; a new attempt will follow"}
	}
}

// requestHead is what the gateway reads of a model request.
type requestHead struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
}

// complete serves a model request: from the journal, refused, or relayed
// to the model and recorded.
func (x *externalRun) complete(ctx context.Context, a *attemptGateway, ex *exchange) (*llm.RelayResponse, error) {
	var head requestHead
	if err := json.Unmarshal(ex.body, &head); err != nil {
		return nil, &GatewayError{Status: http.StatusBadRequest, Code: GatewayInvalidRequest, Message: "the request body is not a JSON object: " + err.Error()}
	}
	if head.Model == "" {
		return nil, &GatewayError{Status: http.StatusBadRequest, Code: GatewayInvalidRequest, Message: "the request names no model: set model to one of " + fmt.Sprint(x.g.Models())}
	}
	key, err := x.requestKey(ex)
	if err != nil {
		return nil, err
	}
	rec, mark := a.journal.take(agent.KindCompletion, key, false)
	if rec != nil {
		ctx, span := tracer.Start(ctx, "chat "+head.Model, trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", head.Model),
			telemetry.KeyConversationID.String(x.wf.ID),
			attribute.Bool("agentplane.journal", true)))
		defer span.End()
		for _, ev := range rec.answer.Events {
			if err := ex.send(ev); err != nil || ctx.Err() != nil {
				break
			}
		}
		return rec.answer, nil
	}
	ev := agent.Event{Action: ActionCompletion, Kind: agent.KindCompletion, Model: head.Model}
	refuse := func(status int, code, errCode, msg string) (*llm.RelayResponse, error) {
		ev.Status, ev.Error, ev.ErrorCode = agent.StatusError, msg, errCode
		if code == GatewayLimitExceeded {
			ev.Action, ev.Status, ev.ErrorCode = agent.ActionTokenLimitReached, agent.StatusLimitExceeded, ""
			x.limited = msg
		}
		if err := x.emit(ev, a.attempt, mark); err != nil {
			return nil, err
		}
		return nil, &GatewayError{Status: status, Code: code, Message: msg}
	}
	if x.g.AllowsModel(head.Model) {
		// A spent budget may ask for more first; denied or not asked,
		// admit refuses the request as over the limit.
		if waiting, err := x.askMore(ctx, a, agent.LimitLLMTokens); err != nil {
			return nil, err
		} else if waiting != "" {
			return nil, &GatewayError{Status: http.StatusConflict, Code: GatewayRunWaiting, Message: waiting}
		}
	}
	if no := x.admit(head.Model); no != nil {
		return refuse(no.status, no.code, no.errCode(), no.msg)
	}
	// As before a plan step's request, everything before it is stored
	// first (x.j.flush), the workflow's own row among it: the execution
	// began while Start stored it, and recording the completion needs it.
	start := x.r.opts.Now()
	m, resp, no, err := x.relayLive(ctx, ex, head.Model, x.j.flush)
	switch {
	case no != nil && resp != nil:
		// Cut short: the step is an error, and the tokens the model
		// produced count as an answer's do. Its record is no answer a
		// journal serves again.
		usage := resp.Usage
		ev.Status, ev.Error, ev.ErrorCode, ev.Usage = agent.StatusError, no.msg+countedOf(resp), no.errCode(), &usage
		c := x.wireCompletion(m, ex, key, resp, start)
		x.tokens += usage.Total()
		if err := x.note(ev, a.attempt, mark, c); err != nil {
			return nil, err
		}
		return nil, &GatewayError{Status: no.status, Code: no.code, Message: no.msg}
	case no != nil:
		return refuse(no.status, no.code, no.errCode(), no.msg)
	case err != nil && resp != nil:
		// The run stopped while the model answered: the tokens it
		// produced count all the same.
		ev = stoppedCompletion(ctx, ev, resp)
		x.tokens += resp.Usage.Total()
		return nil, x.noteStopped(ctx, m, ev, a.attempt, mark, x.wireCompletion(m, ex, key, resp, start), err)
	case err != nil && ctx.Err() == nil && !errors.Is(err, errJournal):
		return nil, x.rec.pause(ctx, err)
	case err != nil:
		return nil, err
	}
	if resp.Status != http.StatusOK {
		// The provider's own answer goes back as it is; the step says why.
		ev.Status, ev.ErrorCode = agent.StatusError, agent.ErrorCodeLLM
		ev.Error = x.providerError(ex.api, resp)
		if err := x.emit(ev, a.attempt, mark); err != nil {
			return nil, err
		}
		return resp, nil
	}
	usage := resp.Usage
	ev.Status, ev.Usage, ev.FinishReason = agent.StatusOK, &usage, resp.FinishReason
	c := x.wireCompletion(m, ex, key, resp, start)
	x.tokens += usage.Total()
	if err := x.note(ev, a.attempt, mark, c); err != nil {
		return nil, err
	}
	x.record = append(x.record, recorded{kind: agent.KindCompletion, key: key, step: x.step, api: ex.api, answer: resp})
	return resp, nil
}

// providerError is a completion step's error for a provider's error
// answer: its status and words, and, for a 404 to a Responses API request,
// what to do about it (many OpenAI-compatible servers serve only Chat
// Completions, and the agent's framework can be told to use it).
func (x *externalRun) providerError(api string, resp *llm.RelayResponse) string {
	msg := fmt.Sprintf("the model answered %d: %s", resp.Status, clipText(x.rec.maskText(string(resp.Body))))
	if resp.Status == http.StatusNotFound && api == llm.Responses {
		msg += " (the provider may not serve OpenAI's Responses API: have the agent use Chat Completions, " +
			"e.g. setOpenAIAPI('chat_completions') in the OpenAI Agents SDK)"
	}
	return msg
}

// refusal is why the gateway refuses a model request without sending it.
type refusal struct {
	status    int
	code, msg string
}

// errCode is the step's error_code of a refusal ("" for a limit, whose
// step's status says it).
func (r *refusal) errCode() string {
	switch r.code {
	case GatewayLimitExceeded:
		return ""
	case GatewayModelNotAllowed:
		return GatewayModelNotAllowed
	}
	return agent.ErrorCodeLLM
}

// admit refuses a request for a model the version may not use, or past
// the run's max_llm_tokens.
func (x *externalRun) admit(name string) *refusal {
	if !x.g.AllowsModel(name) {
		return &refusal{http.StatusBadRequest, GatewayModelNotAllowed, fmt.Sprintf(
			"model %q is not one of this agent version's models %v: name one of them (GET …/models lists them)", name, x.g.Models())}
	}
	if limit := x.maxTokens(); limit > 0 && x.tokens >= limit {
		return &refusal{http.StatusForbidden, GatewayLimitExceeded, fmt.Sprintf(
			"max_llm_tokens (%d) reached: the run has used %d tokens", limit, x.tokens)}
	}
	return nil
}

// errJournal marks a failure to store the steps before a request.
var errJournal = errors.New("store the steps before the request")

// relayLive sends a model request to the registered model it names, once
// the registry and the model's daily budget allow it; beforeSend runs
// before the budget is read, so that it counts every completion before
// this one. It returns the model and the provider's answer (an error
// answer included), or why it was refused; an answer cut short is both,
// holding what came of it and the tokens it cost (llm.RelayResponse.Cut).
// An error is the store's (wrapping errJournal when beforeSend failed) or
// the context's, with the answer it cut short, if any.
func (x *externalRun) relayLive(ctx context.Context, ex *exchange, name string, beforeSend func() error) (*model.Model, *llm.RelayResponse, *refusal, error) {
	m, err := x.r.opts.Models.Model(ctx, x.wf.Tenant, name)
	switch {
	case problem.Is(err, problem.NotFound):
		return nil, nil, &refusal{http.StatusBadRequest, GatewayModelNotAllowed, fmt.Sprintf(
			"model %q is no longer registered: register it again (POST /v1/models)", name)}, nil
	case err != nil:
		return nil, nil, nil, fmt.Errorf("model %s: %w", name, err)
	}
	if why := llm.Mismatch(ex.api, m); why != "" {
		// The agent's mistake, which a retry does not mend.
		return nil, nil, &refusal{http.StatusBadRequest, GatewayInvalidRequest, why}, nil
	}
	if beforeSend != nil {
		if err := beforeSend(); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %w", errJournal, err)
		}
	}
	if err := x.r.dailyBudget(ctx, x.wf.Tenant, m); err != nil {
		var be *agent.BudgetError
		if errors.As(err, &be) {
			return nil, nil, &refusal{http.StatusForbidden, GatewayLimitExceeded, be.Reason}, nil
		}
		return nil, nil, nil, err
	}
	if x.r.opts.External.Relay == nil {
		return nil, nil, &refusal{http.StatusServiceUnavailable, GatewayUnavailable, "this server relays no model requests"}, nil
	}
	// The agent's going away ends the request: no one would read its
	// answer, and the run's later exchanges wait behind it.
	relayCtx, stop := context.WithCancel(ctx)
	defer stop()
	if ex.ctx != nil {
		defer context.AfterFunc(ex.ctx, stop)()
	}
	resp, err := x.r.opts.External.Relay.Relay(redact.NewContext(relayCtx, x.rec.mask, x.rec.detect), m,
		llm.RelayRequest{API: ex.api, Body: ex.body, Header: ex.header}, ex.send)
	if err != nil {
		if resp != nil && !resp.Cut {
			resp = nil
		}
		if ctx.Err() != nil {
			return m, resp, nil, ctx.Err()
		}
		if ex.ctx != nil && ex.ctx.Err() != nil {
			return m, resp, &refusal{http.StatusServiceUnavailable, GatewayUnavailable,
				"the agent closed its request before the answer ended: the request to the model was cancelled"}, nil
		}
		return m, resp, &refusal{http.StatusBadGateway, GatewayUpstreamError, x.rec.maskText(err.Error())}, nil
	}
	return m, resp, nil, nil
}

// countedOf is what the step of a completion cut short (resp) says of its
// tokens: how many, and whether the provider reported them or they are
// estimated (llm.EstimateTokens).
func countedOf(resp *llm.RelayResponse) string {
	how := func(estimated bool, from string) string {
		if estimated {
			return "estimated from " + from
		}
		return "as the model reported them"
	}
	return fmt.Sprintf("; counted: %d input tokens %s, %d output tokens %s",
		resp.Usage.InputTokens, how(resp.InputEstimated, "the request"),
		resp.Usage.OutputTokens, how(resp.OutputEstimated, "the answer received"))
}

// stoppedCompletion is ev as the step of a completion whose answer the
// run's stop (ctx's end) cut short (resp): cancelled, with the tokens the
// model produced.
func stoppedCompletion(ctx context.Context, ev agent.Event, resp *llm.RelayResponse) agent.Event {
	usage := resp.Usage
	ev.Status, ev.Usage = agent.StatusCancelled, &usage
	ev.Error = stoppedWords(ctx, resp)
	return ev
}

// stoppedWords is what the step of a completion the run's stop cut short
// (resp) says: why, and the tokens counted.
func stoppedWords(ctx context.Context, resp *llm.RelayResponse) string {
	why, _ := stopReason(context.Cause(ctx))
	return cmp.Or(why, "the run stopped") + " while the model answered: the request to the model was cancelled" + countedOf(resp)
}

// afterStop bounds a write made for a run that has stopped, on a context
// its stop does not end.
const afterStop = 5 * time.Second

// noteStopped records the step ev of a completion the run's stop cut
// short, with its record c, so that the workflow's usage and cost and the
// model's daily budget count its tokens: the journal, whose writes the
// stop does not end, stores it with the workflow's end (a cancel, the
// deadline) or before its lease is released (a shutdown). A replica that
// lost the lease may store no step of the workflow: the tokens count in
// the tenant's usage alone. It returns stop, the context's error, or the
// journal's failure.
func (x *externalRun) noteStopped(ctx context.Context, m *model.Model, ev agent.Event, attempt int, mark string, c *Completion, stop error) error {
	if errors.Is(context.Cause(ctx), errLeaseLost) {
		x.r.countAfterStop(ctx, x.wf, m, *ev.Usage)
		return stop
	}
	if err := x.note(ev, attempt, mark, c); err != nil {
		return err
	}
	return stop
}

// dailyBudget refuses a completion of a model whose daily token budget the
// tenant has used (an *agent.BudgetError); any other error is the store's.
func (r *Runner) dailyBudget(ctx context.Context, tenant string, m *model.Model) error {
	if m.DailyTokenBudget <= 0 {
		return nil
	}
	used, err := r.opts.Store.TokensToday(ctx, tenant, m.Name, r.opts.Now())
	if err != nil {
		return &storeError{fmt.Errorf("usage of model %s: %w", m.Name, err)}
	}
	if used >= m.DailyTokenBudget {
		return &agent.BudgetError{Reason: fmt.Sprintf("model %q has used its daily budget of %d tokens for this tenant", m.Name, m.DailyTokenBudget)}
	}
	return nil
}

// wireRecord is a relayed exchange as its completion's record keeps it,
// beside the conversation in the form every view reads.
type wireRecord struct {
	API     string          `json:"api"`
	Request json.RawMessage `json:"request"`
	Status  int             `json:"status"`
	Body    json.RawMessage `json:"body,omitempty"`
	Events  []string        `json:"events,omitempty"`
	// Cut marks a stream that ended before its end: its events are what
	// came, no answer to serve again.
	Cut bool `json:"cut,omitempty"`
}

// wireCompletion is the record of a relayed completion, numbered next:
// its usage and cost, the conversation as views read it, and the exchange
// as sent, which a new attempt's journal serves again.
func (x *externalRun) wireCompletion(m *model.Model, ex *exchange, key string, resp *llm.RelayResponse, start time.Time) *Completion {
	x.completions++
	c := &Completion{
		WorkflowID: x.wf.ID, N: x.completions, Step: x.step + 1, Tenant: x.wf.Tenant, Agent: x.wf.Agent, AgentVersion: x.wf.AgentVersion,
		Model: m.Name, ProviderModel: cmp.Or(resp.ProviderModel, m.Model), FinishReason: resp.FinishReason,
		InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, CreatedAt: start.UTC(),
	}
	req, answer, err := llm.Normalize(ex.api, ex.body, resp)
	if err != nil {
		answer = agent.ChatResponse{}
	}
	w := wireOf(ex, resp)
	rec := struct {
		agent.RecordedCompletion
		Step int         `json:"step"`
		Cost *Cost       `json:"cost,omitempty"`
		Wire *wireRecord `json:"wire"`
	}{RecordedCompletion: agent.RecordedCompletion{RequestSHA256: key, Response: answer}, Step: c.Step, Wire: &w}
	if err == nil {
		rec.Request = &req
	}
	if m.Price != nil {
		c.Cost = m.Price.Cost(c.InputTokens, c.OutputTokens)
		c.Currency = cmp.Or(m.Price.Currency, model.DefaultCurrency)
		rec.Cost = &Cost{Amount: c.Cost, Currency: c.Currency}
	}
	data, _ := json.Marshal(rec)
	c.Data = x.rec.maskJSON(data)
	return c
}

// recordedWire is a recorded relayed completion, as a journal serves it.
type recordedWire struct {
	key, api string
	answer   *llm.RelayResponse
}

// decodeWireCompletion reads the exchange a relayed completion's record
// keeps, with the usage it was counted with (a stream's usage chunk the
// relay asked for is not among its events); false for any other record,
// and for a stream cut short, which answers nothing.
func decodeWireCompletion(data json.RawMessage) (recordedWire, bool) {
	var rc struct {
		RequestSHA256 string `json:"request_sha256"`
		Response      struct {
			Usage *agent.Usage `json:"usage"`
		} `json:"response"`
		Wire *wireRecord `json:"wire"`
	}
	if len(data) == 0 || json.Unmarshal(data, &rc) != nil || rc.Wire == nil || rc.Wire.Cut {
		return recordedWire{}, false
	}
	answer := rc.Wire.answer()
	if u := rc.Response.Usage; u != nil {
		answer.Usage = *u
	}
	return recordedWire{key: rc.RequestSHA256, api: rc.Wire.API, answer: answer}, true
}

// wireOf is the record of an exchange as relayed: the request as the
// agent sent it and the answer as the provider gave it.
func wireOf(ex *exchange, resp *llm.RelayResponse) wireRecord {
	w := wireRecord{API: ex.api, Request: json.RawMessage(ex.body), Status: resp.Status, Cut: resp.Cut}
	if json.Valid(resp.Body) {
		w.Body = resp.Body
	}
	for _, ev := range resp.Events {
		w.Events = append(w.Events, string(ev))
	}
	return w
}

// answer is the recorded answer as the gateway serves it again: a stream
// as the same events.
func (w *wireRecord) answer() *llm.RelayResponse {
	ans := &llm.RelayResponse{Status: w.Status, Body: w.Body, Header: http.Header{}}
	if len(w.Events) > 0 {
		ans.Header.Set("Content-Type", "text/event-stream")
		for _, ev := range w.Events {
			ans.Events = append(ans.Events, []byte(ev))
		}
	} else {
		ans.Header.Set("Content-Type", "application/json")
	}
	return ans
}

// callKey is the journal's identity of a call: tool, operation and the
// canonical form of its recorded (masked) arguments.
func callKey(toolName, opID string, args json.RawMessage) string {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	canon, err := agent.CanonicalJSON(args)
	if err != nil {
		canon = args
	}
	return agent.CallKey(toolName, opID, canon)
}

// call serves a tool call: from the journal, refused, or made through the
// same path as a definition's calls, and recorded.
func (x *externalRun) call(ctx context.Context, a *attemptGateway, ex *exchange) (CallAnswer, error) {
	op := ex.op
	key := callKey(op.Tool, op.ID, x.rec.maskArgs(op.Tool, ex.args))
	rec, mark := a.journal.take(agent.KindCall, key, op.Kind != tool.Read)
	if rec != nil {
		return answerOf(rec.call, true), nil
	}
	ev := agent.Event{Action: ActionCall, Kind: agent.KindCall, Tool: op.Tool, Operation: op.ID, Args: ex.args}
	refuse := func(status, errCode, msg string) (CallAnswer, error) {
		ev.Status, ev.Error, ev.ErrorCode = status, msg, errCode
		if status == agent.StatusLimitExceeded {
			ev.Action = agent.ActionLimitReached
			x.limited = msg
		}
		if err := x.emit(ev, a.attempt, mark); err != nil {
			return CallAnswer{}, err
		}
		return CallAnswer{IsError: true, Message: msg}, nil
	}
	if reason := x.g.Refusal(ctx, x.in, op, ex.args); reason != "" {
		return refuse(agent.StatusDenied, "", "denied: "+reason)
	}
	if waiting, err := x.askMore(ctx, a, agent.LimitToolCalls); err != nil {
		return CallAnswer{}, err
	} else if waiting != "" {
		return CallAnswer{IsError: true, Message: waiting}, nil
	}
	if n := x.maxCalls(); x.calls >= n {
		return refuse(agent.StatusLimitExceeded, "", fmt.Sprintf("max_tool_calls (%d) reached: the run may make no more calls", n))
	}
	digest := callDigest(key)
	if op.Kind != tool.Read {
		if in, ok := x.interrupted(op, digest); ok {
			return refuse(agent.StatusError, ErrorCodeInterrupted, fmt.Sprintf(
				"%s.%s may have reached the tool before the server stopped (step %d), and repeating it is not safe: the call was not sent again",
				op.Tool, op.ID, in.Step))
		}
	}
	approval := -1
	if req := x.g.Approval(ctx, x.in, op, ex.args); req != nil {
		held, refusal, err := x.approve(ctx, a, op, ex.args, key, req)
		if held < 0 {
			if refusal != nil {
				return *refusal, err
			}
			return CallAnswer{}, err
		}
		approval = held
	}
	x.calls++
	n := x.made[key] + 1
	res, err := x.rec.Call(ctx, x.step+1, agent.ToolCall{Action: ActionCall, Tool: op.Tool, Operation: op.ID, Kind: op.Kind,
		Args: ex.args, IdempotencyKey: x.wf.ID + ".c" + digest + "." + strconv.Itoa(n), CallDigest: digest})
	if err != nil {
		return CallAnswer{}, err
	}
	sent := x.rec.sent(x.step + 1)
	if sent {
		x.made[key] = n
	}
	if approval >= 0 && res.Status == agent.StatusOK {
		x.approvals[approval].used = true
	}
	ev.Status, ev.Result, ev.Error, ev.ErrorCode = res.Status, res.Result, res.Err, res.ErrorCode
	if res.Status == agent.StatusCancelled {
		ev.Result = nil
	}
	record := x.emit
	if op.Kind == tool.Read {
		record = func(ev agent.Event, attempt int, journal string) error { return x.note(ev, attempt, journal, nil) }
	}
	if err := record(ev, a.attempt, mark); err != nil {
		return CallAnswer{}, err
	}
	if res.Status == agent.StatusCancelled {
		return CallAnswer{}, ctx.Err()
	}
	if sent {
		// As a new execution reads the record (newExternalRun): a call
		// never sent (an open circuit, a fault) is made again.
		x.record = append(x.record, recorded{kind: agent.KindCall, key: key, step: x.step, call: res})
	}
	return answerOf(res, false), nil
}

// callDigest names a call by its journal key (tool, operation and
// canonical masked arguments): 16 hex digits of its SHA-256. A write's
// Idempotency-Key is <workflow_id>.c<digest>.<n>, the n-th identical call
// the run sends, and an unrepeatable write's intent keeps the digest. A
// call repeated in a new attempt after its answer went unrecorded (a crash
// while it was in flight) is the same call, with the same key and intent,
// whatever the attempt made before it: its calls may come in another order
// (a framework's parallel calls) or differ (an agent that diverged), and no
// other call takes its key or is refused for its intent.
func callDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// answerOf is a call's answer to the agent.
func answerOf(res agent.CallResult, journal bool) CallAnswer {
	out := CallAnswer{Result: res.Result, Journal: journal}
	if res.Status != agent.StatusOK {
		out.IsError = true
		out.Message = cmp.Or(res.Err, "the call failed")
	}
	return out
}

// interrupted finds an unrepeatable write an earlier execution may have
// sent: the same call (digest) as op's, not yet answered. It stays: every
// repeat of the call is refused, as the agent's repeats of a write never
// send it twice. An intent stored before intents named their call matches
// any call of its operation, and is taken: one refusal.
func (x *externalRun) interrupted(op agent.GatewayOperation, digest string) (Intent, bool) {
	for step, in := range x.intents {
		if in.Tool != op.Tool || in.Operation != op.ID {
			continue
		}
		switch in.Call {
		case digest:
			return in, true
		case "":
			delete(x.intents, step)
			return in, true
		}
	}
	return Intent{}, false
}

// journalCursor is what an attempt's journal has served of the run's
// record.
type journalCursor struct {
	entries []recorded
	used    []bool
	// next is the index of the next completion to match.
	next int
	// active is false for a first attempt (nothing recorded to serve).
	active   bool
	diverged bool
	// served counts the exchanges answered from the record: the attempt
	// step's journal_served.
	served int
}

func newJournalCursor(record []recorded, active bool) *journalCursor {
	return &journalCursor{entries: record, used: make([]bool, len(record)), active: active && len(record) > 0}
}

// take serves an exchange from the record: a completion identical to the
// next recorded completion; a call identical to an unused recorded call
// (in any order, each once). Once an exchange differed, only writes are
// still matched (a write is never sent twice while the agent repeats
// itself); mark is the step's journal mark when this exchange diverged.
func (c *journalCursor) take(kind, key string, write bool) (rec *recorded, mark string) {
	if c == nil || !c.active {
		return nil, ""
	}
	if c.diverged && !write {
		return nil, ""
	}
	if kind == agent.KindCall {
		for i := range c.entries {
			if !c.used[i] && c.entries[i].kind == kind && c.entries[i].key == key {
				c.used[i] = true
				c.served++
				return &c.entries[i], ""
			}
		}
		return nil, c.mark(kind)
	}
	for i := c.next; i < len(c.entries); i++ {
		if c.entries[i].kind != kind {
			continue
		}
		if c.entries[i].key == key && !c.diverged {
			c.used[i], c.next = true, i+1
			c.served++
			return &c.entries[i], ""
		}
		return nil, c.mark(kind)
	}
	return nil, ""
}

// mark diverges the journal at an exchange served live while recorded
// exchanges of its kind were left, and returns the step's mark.
func (c *journalCursor) mark(kind string) string {
	if c == nil || !c.active || c.diverged {
		return ""
	}
	for i, e := range c.entries {
		if e.kind == kind && !c.used[i] {
			c.diverged = true
			return JournalDiverged
		}
	}
	return ""
}
