package workflow

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// governance compiles an external version against the tenant's tools and
// models, again only when one of its tools has changed since; it returns
// the tools it looked up.
func (r *Runner) governance(ctx context.Context, v *agent.Version) (*agent.Governance, []*tool.Tool, error) {
	x := *v.External
	tools, err := r.tools(ctx, v.Tenant, x.Tools)
	if err != nil {
		return nil, nil, err
	}
	key, revs := v.Tenant+"/"+v.Ref(), revisions(tools)
	if g := r.governances.get(key, revs); g != nil {
		return g, tools, nil
	}
	cat, err := r.catalog(ctx, v.Tenant, tools, x.ModelNames(), nil)
	if err != nil {
		return nil, nil, err
	}
	g, errs := agent.CompileExternal(x, cat)
	if len(errs) > 0 {
		return nil, nil, problem.New(problem.ValidationFailed, "%s no longer compiles against the registered tools and models: external.%s: %s",
			v.Ref(), errs[0].Field, errs[0].Message)
	}
	r.governances.put(key, revs, g)
	return g, tools, nil
}

// startExternal is Start of an external version: the workflow's time limit
// is the version's timeout, and its bounds the version's limits unless the
// invocation sets its own.
func (r *Runner) startExternal(ctx context.Context, req StartRequest, v *agent.Version, maxCalls int) (*Workflow, error) {
	g, tools, err := r.governance(ctx, v)
	if err != nil {
		return nil, err
	}
	if errs := g.ValidateContext(req.Context); len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	if req.MaxToolCalls == nil && g.MaxToolCalls() > 0 {
		maxCalls = g.MaxToolCalls()
	}
	wf, err := r.newWorkflow(v, req, maxCalls)
	if err != nil {
		return nil, err
	}
	wf.Deadline = wf.StartedAt.Add(v.External.RunTimeout())
	wf.ToolRevisions = toolRevisions(tools)
	return r.store(ctx, req, wf, func(c *creation) error {
		h := history{tools: tools, created: c}
		return r.launchFunc(trace.SpanContextFromContext(ctx), wf, func(ctx context.Context) { r.executeExternal(ctx, wf, v, g, h) })
	})
}

// resumeExternal starts a new attempt of a claimed external workflow.
func (r *Runner) resumeExternal(wf *Workflow, v *agent.Version, h history, g *agent.Governance) error {
	return r.launchFunc(trace.SpanContext{}, wf, func(ctx context.Context) { r.executeExternal(ctx, wf, v, g, h) })
}
