package workflow

import (
	"context"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

// Read makes a call of a what-if replay of wf that has no recorded answer,
// through the tool caller workflows use (the tool's credentials, SSRF and
// secret rules), on behalf of wf's caller, whose scopes and the target's
// policies the engine has checked already. Only an operation registered as
// a read is sent: anything else comes back unrecorded, so a dry run never
// sends a write. A tool or operation no longer registered is unrecorded
// too; a store failure is an error.
func (r *Runner) Read(ctx context.Context, wf *Workflow, c agent.ToolCall) (agent.CallResult, tool.CallResult, error) {
	unrecorded := agent.CallResult{Status: agent.StatusUnrecorded}
	t, err := r.opts.Tools.ToolByName(ctx, wf.Tenant, c.Tool)
	if problem.Is(err, problem.NotFound) {
		return unrecorded, tool.CallResult{}, nil
	}
	if err != nil {
		return agent.CallResult{}, tool.CallResult{}, err
	}
	op, err := r.operation(ctx, wf.Tenant, t, c.Operation)
	if problem.Is(err, problem.NotFound) {
		return unrecorded, tool.CallResult{}, nil
	}
	if err != nil {
		return agent.CallResult{}, tool.CallResult{}, err
	}
	if op.Kind != tool.Read {
		return unrecorded, tool.CallResult{}, nil
	}
	// The replay keeps what the read answered: masked, as a workflow's
	// history is, and so is what its program sees (its recorded answers
	// are masked too).
	e := &recorder{r: r, wf: wf, tools: map[string]*tool.Tool{t.Name: t}}
	if err := e.masking(ctx); err != nil {
		return agent.CallResult{}, tool.CallResult{}, err
	}
	e.maskArgs(c.Tool, c.Args)
	_, _, detect := e.redaction(c.Tool)
	ctx = redact.NewContext(ctx, e.mask, detect)
	res, err := r.opts.Caller.Call(ctx, tool.CallRequest{
		Tenant: wf.Tenant, Tool: t, Operation: op, Args: c.Args, WorkflowID: wf.ID, RequestID: wf.RequestID,
		Actor: audit.Actor{Sub: wf.Caller.Sub, ClientID: wf.Caller.ClientID},
	})
	res = e.maskCall(c.Tool, c.Args, res)
	switch {
	case err != nil && ctx.Err() != nil:
		return agent.CallResult{}, res, ctx.Err()
	case err != nil:
		return agent.CallResult{Status: agent.StatusError, Result: res.Body, Err: callError(err), ErrorCode: tool.ErrorCode(err)}, res, nil
	}
	return agent.CallResult{Status: agent.StatusOK, Result: res.Body}, res, nil
}
