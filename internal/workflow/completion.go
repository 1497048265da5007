package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
)

// Complete implements agent.Completer: recorded completions are served
// again; a new one is asked of its model, unless the tenant's tokens
// through that model today have reached its daily budget, and recorded
// (with its usage) with the step that reports it (see answer).
func (e *recorder) Complete(ctx context.Context, step, n int, req agent.ChatRequest) (agent.ChatResponse, error) {
	hash, raw, err := hashRequest(e.mask, e.detect, req)
	if err != nil {
		return agent.ChatResponse{}, err
	}
	if b, ok := e.h.completions[n]; ok {
		rc, err := agent.DecodeCompletion(b)
		if err != nil {
			return agent.ChatResponse{}, fmt.Errorf("completion %d: %w", n, err)
		}
		if rc.RequestSHA256 != "" && rc.RequestSHA256 != hash {
			return agent.ChatResponse{}, nondeterministic("completion %d was recorded for another request", n)
		}
		return rc.Response, nil
	}
	m, resp, err := e.r.request(redact.NewContext(ctx, e.mask, e.detect), e.wf.Tenant, req, e.j.flush)
	var se *storeError
	if errors.As(err, &se) {
		return agent.ChatResponse{}, e.pause(ctx, se.err)
	}
	if err != nil && ctx.Err() != nil && m != nil && resp.Usage != nil {
		return agent.ChatResponse{}, e.stopped(ctx, step, n, m, hash, raw, resp)
	}
	if err != nil {
		return resp, err
	}
	c, err := e.completion(step, n, m, hash, raw, resp)
	if err != nil {
		return resp, err
	}
	e.answered[step] = c
	return resp, nil
}

// stopped counts a completion the run's stop cut short after the provider
// read its request (resp, its usage alone: llm.Client), as an external
// agent's is counted (noteStopped). When the workflow ends there (a
// cancel, the deadline), it is a *agent.StoppedError, and its record goes
// with its step, cancelled, stored with the workflow's end. When the
// workflow is resumed instead (a shutdown, a lost lease), the resumed run
// asks for the completion again, so no step of it is kept: its tokens
// count in the tenant's usage alone, and the context's error is returned.
func (e *recorder) stopped(ctx context.Context, step, n int, m *model.Model, hash string, raw json.RawMessage, resp agent.ChatResponse) error {
	if _, ended := stopReason(context.Cause(ctx)); !ended {
		e.r.countAfterStop(ctx, e.wf, m, *resp.Usage)
		return ctx.Err()
	}
	c, err := e.completion(step, n, m, hash, raw, resp)
	if err != nil {
		return err
	}
	e.answered[step] = c
	// Nothing of the answer came: its input is estimated from the request.
	cut := &llm.RelayResponse{Cut: true, Usage: *resp.Usage, InputEstimated: true, OutputEstimated: true}
	return &agent.StoppedError{Usage: *resp.Usage, Reason: stoppedWords(ctx, cut)}
}

// answer returns the completion the step reports, if it reports one not
// yet stored: it is stored with its step, one commit for both, before the
// execution sends anything after it (journal.beforeRead, and the flush
// before a write or a completion request). Its step always follows it, as
// the plan step emits the event of every completion answered.
func (e *recorder) answer(step int) *Completion {
	c := e.answered[step]
	delete(e.answered, step)
	return c
}

// storeError is a failure to read a model or its usage from the store:
// transient, so a workflow pauses on it instead of failing.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }

// request asks the tenant's model req names (default "default") for a
// completion, unless the tenant has used the model's daily token budget
// (an *agent.BudgetError, nothing requested). beforeSend, when set, runs
// before the budget is read, so that it counts every completion before
// this one.
func (r *Runner) request(ctx context.Context, tenant string, req agent.ChatRequest, beforeSend func() error) (*model.Model, agent.ChatResponse, error) {
	if r.opts.Models == nil || r.opts.LLM == nil {
		return nil, agent.ChatResponse{}, agent.ErrNoPlanner
	}
	name := cmp.Or(req.Model, model.DefaultName)
	m, err := r.opts.Models.Model(ctx, tenant, name)
	switch {
	case problem.Is(err, problem.NotFound):
		if name == model.DefaultName {
			// The registry says how the server-wide model is defined.
			return nil, agent.ChatResponse{}, fmt.Errorf("model %q: %s", name, problem.As(err).Detail)
		}
		return nil, agent.ChatResponse{}, fmt.Errorf("model %q is not registered: register it (POST /v1/models) or name another in the agent definition", name)
	case err != nil:
		return nil, agent.ChatResponse{}, &storeError{fmt.Errorf("model %s: %w", name, err)}
	}
	client, err := r.opts.LLM.Client(m)
	if err != nil {
		return nil, agent.ChatResponse{}, fmt.Errorf("model %s: %w", name, err)
	}
	if beforeSend != nil {
		if err := beforeSend(); err != nil {
			return nil, agent.ChatResponse{}, err
		}
	}
	if err := r.dailyBudget(ctx, tenant, m); err != nil {
		return nil, agent.ChatResponse{}, err
	}
	resp, err := client.Complete(ctx, req)
	return m, resp, err
}

// LiveCompletion requests a completion outside any workflow's history (a
// live what-if replay's) the way a workflow's are: from the tenant's model
// req names, within its daily budget. Its tokens and cost count toward the
// tenant's usage under agentName; the model is returned for its price.
func (r *Runner) LiveCompletion(ctx context.Context, tenant, agentName string, req agent.ChatRequest) (agent.ChatResponse, *model.Model, error) {
	m, resp, err := r.request(ctx, tenant, req, nil)
	if err != nil {
		return resp, nil, err
	}
	var usage agent.Usage
	if resp.Usage != nil {
		usage = *resp.Usage
	}
	if err := r.countUsage(ctx, tenant, agentName, m, usage); err != nil {
		return resp, m, err
	}
	return resp, m, nil
}

// countUsage counts a completion's tokens, and their cost at m's price, in
// the tenant's usage under agentName, outside any workflow's history.
func (r *Runner) countUsage(ctx context.Context, tenant, agentName string, m *model.Model, usage agent.Usage) error {
	u := UsageRecord{Tenant: tenant, Agent: agentName, Model: m.Name, At: r.opts.Now(),
		InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens}
	if m.Price != nil {
		u.Cost, u.Currency = m.Price.Cost(u.InputTokens, u.OutputTokens), priceCurrency(m)
	}
	if err := r.opts.Store.RecordUsage(ctx, u); err != nil {
		return fmt.Errorf("count completion in usage: %w", err)
	}
	return nil
}

// countAfterStop counts a completion of wf's in the tenant's usage alone
// once ctx has ended, on a context of its own for a short while; a
// failure is logged.
func (r *Runner) countAfterStop(ctx context.Context, wf *Workflow, m *model.Model, usage agent.Usage) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterStop)
	defer cancel()
	if err := r.countUsage(wctx, wf.Tenant, wf.Agent, m, usage); err != nil {
		r.opts.Logger.Warn("the tokens of a completion the run's stop cut short were not counted",
			"workflow_id", wf.ID, "model", m.Name, "err", err)
	}
}

// completion is the record of a new completion: the request (req, as
// encoded for its hash) and response whole, the usage the provider
// reported and its cost at m's price.
func (e *recorder) completion(step, n int, m *model.Model, hash string, req json.RawMessage, resp agent.ChatResponse) (*Completion, error) {
	c := &Completion{
		WorkflowID: e.wf.ID, N: n, Step: step, Tenant: e.wf.Tenant, Agent: e.wf.Agent, AgentVersion: e.wf.AgentVersion,
		Model: m.Name, ProviderModel: cmp.Or(resp.Model, m.Model), FinishReason: resp.FinishReason,
		CreatedAt: e.r.opts.Now().UTC(),
	}
	if resp.Usage != nil {
		c.InputTokens, c.OutputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
	}
	var cost *Cost
	if m.Price != nil {
		c.Cost = m.Price.Cost(c.InputTokens, c.OutputTokens)
		c.Currency = cmp.Or(m.Price.Currency, model.DefaultCurrency)
		cost = &Cost{Amount: c.Cost, Currency: c.Currency}
	}
	data, err := completionRecord(hash, req, resp, step, cost)
	if err != nil {
		return nil, fmt.Errorf("encode completion: %w", err)
	}
	c.Data = e.maskJSON(data)
	return c, nil
}

// completionRecord encodes a completion's record: its members are
// agent.RecordedCompletion's, and it carries its step and cost beside the
// exchange, so a replay reading the history alone has them. req is the
// request as json.Marshal encoded it once (hashRequest), compact and
// HTML-escaped, so it goes in as it is: as a json.RawMessage member,
// encoding/json would scan the whole conversation again to compact what
// is compact already, and write the same bytes.
func completionRecord(hash string, req json.RawMessage, resp agent.ChatResponse, step int, cost *Cost) ([]byte, error) {
	rest, err := json.Marshal(struct {
		Response agent.ChatResponse `json:"response"`
		Step     int                `json:"step"`
		Cost     *Cost              `json:"cost,omitempty"`
	}{resp, step, cost})
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(`{"request_sha256":"","request":,`)+len(hash)+len(req)+len(rest))
	b = append(b, `{"request_sha256":"`...)
	b = append(b, hash...)
	b = append(b, `","request":`...)
	if len(req) == 0 {
		req = json.RawMessage("null")
	}
	b = append(b, req...)
	b = append(b, ',')
	return append(b, rest[1:]...), nil
}
