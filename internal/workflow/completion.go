package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/internal/agent"
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
	u := UsageRecord{Tenant: tenant, Agent: agentName, Model: m.Name, At: r.opts.Now()}
	if resp.Usage != nil {
		u.InputTokens, u.OutputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
	}
	if m.Price != nil {
		u.Cost, u.Currency = m.Price.Cost(u.InputTokens, u.OutputTokens), cmp.Or(m.Price.Currency, model.DefaultCurrency)
	}
	if err := r.opts.Store.RecordUsage(ctx, u); err != nil {
		return resp, m, fmt.Errorf("count completion in usage: %w", err)
	}
	return resp, m, nil
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
	// The record carries its step and cost beside the exchange, so a
	// replay reading the history alone has them. Its members are
	// agent.RecordedCompletion's, the request as it was encoded once.
	rec := struct {
		RequestSHA256 string             `json:"request_sha256"`
		Request       json.RawMessage    `json:"request"`
		Response      agent.ChatResponse `json:"response"`
		Step          int                `json:"step"`
		Cost          *Cost              `json:"cost,omitempty"`
	}{RequestSHA256: hash, Request: req, Response: resp, Step: step}
	if m.Price != nil {
		c.Cost = m.Price.Cost(c.InputTokens, c.OutputTokens)
		c.Currency = cmp.Or(m.Price.Currency, model.DefaultCurrency)
		rec.Cost = &Cost{Amount: c.Cost, Currency: c.Currency}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode completion: %w", err)
	}
	c.Data = e.maskJSON(data)
	return c, nil
}
