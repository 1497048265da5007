package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
	"go.opentelemetry.io/otel/trace"
)

// ToolCaller makes real tool calls (the executor of package tool/call).
type ToolCaller interface {
	Call(ctx context.Context, req tool.CallRequest) (tool.CallResult, error)
}

// ToolLookup finds registered tools and operations (a subset of tool.Store).
type ToolLookup interface {
	ToolByName(ctx context.Context, tenant, name string) (*tool.Tool, error)
	Operations(ctx context.Context, tenant, toolID, q string) ([]tool.Operation, error)
	Operation(ctx context.Context, tenant, toolID, opID string) (*tool.Operation, error)
	ToolRevision(ctx context.Context, tenant, name string, revision int) (*tool.Tool, []tool.Operation, error)
}

// Options configure a Runner.
type Options struct {
	Store    Store
	Versions agent.VersionStore
	Tools    ToolLookup
	Caller   ToolCaller
	// Models finds the registered model a completion names, in the
	// workflow's tenant; LLM gives its client. Without them plan steps are
	// refused.
	Models model.Lookup
	LLM    llm.Clients
	// Owner names this replica in leases; default a new random id.
	Owner string
	// Lease is how long a replica owns a workflow without renewing (default 15 s).
	Lease time.Duration
	// Timeout ends workflows running longer (default 5 min).
	Timeout time.Duration
	// DefaultToolCalls bounds the tool calls of an invocation that sets no
	// max_tool_calls (default 20); MaxToolCalls is the largest bound an
	// invocation may set (default 100).
	DefaultToolCalls int
	MaxToolCalls     int
	// MaxRunning bounds the executions running at once on this replica
	// (default 1,000); further ones queue, holding their leases, until one
	// ends.
	MaxRunning int
	// Redact masks what workflows store and report (the tenant's key,
	// the operator's detectors); nil masks nothing.
	Redact *redact.Service
	// External configures the runs of external agents.
	External ExternalOptions
	// Arms, when set, chooses the arm of a rollout an invocation of an
	// agent's default version runs.
	Arms ArmChooser
	// Catalog, when set, marks each invocation's context with its tenant's
	// catalog generation, so that its reads of its version, tools and
	// rollout may come from a cache (catalogcache.Cache).
	Catalog interface {
		At(ctx context.Context, tenant string) context.Context
	}
	Now    func() time.Time
	Logger *slog.Logger
}

// Runner starts, executes, resumes and follows workflows.
type Runner struct {
	opts     Options
	hub      *hub
	feed     *feed
	programs programCache
	// governances are the compiled external versions.
	governances revCache[*agent.Governance]
	ops         opCache
	// gateways are the external agents' attempts running here.
	gateways gateways

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	// creating are the workflows executing here that Start is still
	// storing: their leases are not renewed yet.
	creating map[string]bool
	// holds are the external agents' calls held here for a decision, by
	// workflow: the workflow waits in the store meanwhile.
	holds map[string]*hold
	// resumeNext are workflows to resume as their execution here returns.
	resumeNext map[string]*Workflow
	// versionSlots bound the runs in flight of external versions with a
	// max_concurrency, by tenant and version.
	versionSlots map[string]chan struct{}
	wg           sync.WaitGroup
	closing      bool
	// onFinish is called after each workflow's end is stored here.
	onFinish func(ctx context.Context, wf *Workflow)

	// slots holds a token per execution running; queued counts those
	// waiting for one.
	slots  chan struct{}
	queued atomic.Int64
}

// OnFinish has f called after the end of each workflow this runner
// finishes is stored (and its waiters woken), on the execution's goroutine:
// how a replay learns that its new workflow ended. Set it before Run.
func (r *Runner) OnFinish(f func(ctx context.Context, wf *Workflow)) {
	r.mu.Lock()
	r.onFinish = f
	r.mu.Unlock()
}

// Causes of stopping an execution without finishing its workflow.
var (
	errShutdown  = errors.New("the server is shutting down")
	errLeaseLost = errors.New("another replica took the workflow over")
	errCancel    = errors.New("cancelled on request")
	// errNotCreated stops the execution of a workflow Start failed to store.
	errNotCreated = errors.New("the workflow was not stored")
	// errPaused stops an execution that a store error kept from going on;
	// the workflow is resumed from what was stored.
	errPaused = errors.New("paused by a store error")
)

// errRunning refuses to launch a workflow already executing on this replica.
var errRunning = errors.New("the workflow is already running here")

// New returns a runner; call Run to renew leases and resume workflows.
// Owner is the name of this replica in leases.
func (r *Runner) Owner() string { return r.opts.Owner }

func New(opts Options) *Runner {
	if _, ok := opts.Versions.(agent.OperationVersions); !ok && opts.Versions != nil {
		opts.Versions = agent.OperationVersions{VersionStore: opts.Versions}
	}
	if opts.Owner == "" {
		opts.Owner = ids.New("rep_")
	}
	if opts.Lease <= 0 {
		opts.Lease = 15 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.DefaultToolCalls <= 0 {
		opts.DefaultToolCalls = 20
	}
	if opts.MaxToolCalls <= 0 {
		opts.MaxToolCalls = 100
	}
	if opts.MaxRunning <= 0 {
		opts.MaxRunning = 1000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	_, shared := opts.Store.(ChangeFeed)
	return &Runner{opts: opts, hub: newHub(), feed: newFeed(shared), running: map[string]context.CancelCauseFunc{}, creating: map[string]bool{}, slots: make(chan struct{}, opts.MaxRunning)}
}

// Program returns the compiled program of a version, compiling it again
// only when one of its tools has changed since.
func (r *Runner) Program(ctx context.Context, v *agent.Version) (*agent.Program, error) {
	p, _, err := r.program(ctx, v)
	return p, err
}

// program is Program, also returning the tools it looked up (an unknown
// name's is nil), which an execution started at once can use as they are.
func (r *Runner) program(ctx context.Context, v *agent.Version) (*agent.Program, []*tool.Tool, error) {
	tools, err := r.tools(ctx, v.Tenant, v.Tools)
	if err != nil {
		return nil, nil, err
	}
	p, err := r.compile(ctx, v, tools, nil)
	return p, tools, err
}

// compile compiles v against tools; pinned are the operations of those
// tools that are not at their current revision (a resume's), by tool name.
// Only programs of current revisions are cached.
func (r *Runner) compile(ctx context.Context, v *agent.Version, tools []*tool.Tool, pinned map[string][]tool.Operation) (*agent.Program, error) {
	key, revs := v.Tenant+"/"+v.Ref(), revisions(tools)
	if p := r.programs.get(key, revs); p != nil && len(pinned) == 0 {
		return p, nil
	}
	def, errs := agent.DecodeDefinition(v.Definition)
	if len(errs) > 0 {
		return nil, fmt.Errorf("stored definition of %s: %w: %s", v.Ref(), errUndecodable, errs[0].Message)
	}
	cat, err := r.catalog(ctx, v.Tenant, tools, def.Models(), pinned)
	if err != nil {
		return nil, err
	}
	p, errs := agent.Compile(def, cat)
	if len(errs) > 0 {
		if v.Name == agent.OperationAgent {
			// A direct call names its operation: say which part is missing.
			return nil, problem.New(problem.ValidationFailed, "%s names no registered operation: %s", v.Ref(), errs[0].Message)
		}
		return nil, problem.New(problem.ValidationFailed, "%s no longer compiles against the registered tools: %s: %s",
			v.Ref(), errs[0].Field, errs[0].Message)
	}
	if len(pinned) == 0 {
		r.programs.put(key, revs, p)
	}
	return p, nil
}

// errUndecodable marks a stored definition that no longer decodes.
var errUndecodable = errors.New("does not decode")

var _ agent.Catalogs = (*Runner)(nil)

// Catalog builds the catalog of the named tools and models; unknown names
// are left out so Compile reports them.
func (r *Runner) Catalog(ctx context.Context, tenant string, toolNames, models []string) (*agent.Catalog, error) {
	tools, err := r.tools(ctx, tenant, toolNames)
	if err != nil {
		return nil, err
	}
	return r.catalog(ctx, tenant, tools, models, nil)
}

// tools looks the named tools up; an unknown name's tool is nil.
func (r *Runner) tools(ctx context.Context, tenant string, names []string) ([]*tool.Tool, error) {
	tools := make([]*tool.Tool, len(names))
	for i, name := range names {
		t, err := r.opts.Tools.ToolByName(ctx, tenant, name)
		if problem.Is(err, problem.NotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		tools[i] = t
	}
	return tools, nil
}

// catalog builds the catalog of tools, leaving out nil ones, and of the
// named models (and "default") the tenant may use; a tool's operations
// are its pinned ones when it has some, else read.
func (r *Runner) catalog(ctx context.Context, tenant string, tools []*tool.Tool, models []string, pinned map[string][]tool.Operation) (*agent.Catalog, error) {
	cat := agent.NewCatalog()
	if err := r.addModels(ctx, cat, tenant, models); err != nil {
		return nil, err
	}
	for _, t := range tools {
		if t == nil {
			continue
		}
		if ops, ok := pinned[t.Name]; ok {
			cat.Add(t, ops)
			continue
		}
		ops, err := r.opts.Tools.Operations(ctx, tenant, t.ID, "")
		if err != nil {
			return nil, err
		}
		cat.Add(t, ops)
	}
	return cat, nil
}

// addModels adds to cat the named models and "default" that the tenant
// may use.
func (r *Runner) addModels(ctx context.Context, cat *agent.Catalog, tenant string, names []string) error {
	if r.opts.Models == nil {
		return nil
	}
	for _, name := range append([]string{agent.DefaultModel}, names...) {
		_, err := r.opts.Models.Model(ctx, tenant, name)
		switch {
		case err == nil:
			cat.AddModel(name)
		case !problem.Is(err, problem.NotFound):
			return fmt.Errorf("model %s: %w", name, err)
		}
	}
	return nil
}

// launch executes wf in the background unless the runner is closing
// (errShutdown) or already executes it (errRunning). The execution continues
// the trace of parent, the request that started it.
func (r *Runner) launch(parent trace.SpanContext, wf *Workflow, prog *agent.Program, h history) error {
	return r.launchFunc(parent, wf, func(ctx context.Context) { r.execute(ctx, wf, prog, h) })
}

// launchFunc is launch of any execution of wf: a definition's program or
// an external agent's attempts.
func (r *Runner) launchFunc(parent trace.SpanContext, wf *Workflow, exec func(ctx context.Context)) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		cancel(errShutdown)
		return errShutdown
	}
	if _, ok := r.running[wf.ID]; ok {
		r.mu.Unlock()
		cancel(errRunning)
		return errRunning
	}
	r.running[wf.ID] = cancel
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.running, wf.ID)
			next := r.resumeNext[wf.ID]
			delete(r.resumeNext, wf.ID)
			r.mu.Unlock()
			cancel(nil)
			if next != nil {
				if err := guard(func() error { return r.resume(context.Background(), next) }); err != nil {
					r.opts.Logger.Warn("resume workflow after its approval; trying again once its lease lapses", "workflow_id", wf.ID, "err", err)
				}
			}
		}()
		defer r.admit(ctx)()
		exec(ctx)
	}()
	return nil
}

// admit waits until fewer than MaxRunning executions run, and returns the
// release of the slot taken. A queued execution counts as running here
// otherwise: its lease is renewed, and a cancel, a lost lease or a
// shutdown stops it at once, without a slot, so that it records why.
func (r *Runner) admit(ctx context.Context) (release func()) {
	select {
	case r.slots <- struct{}{}:
		return func() { <-r.slots }
	default:
	}
	r.queued.Add(1)
	defer r.queued.Add(-1)
	select {
	case r.slots <- struct{}{}:
		return func() { <-r.slots }
	case <-ctx.Done():
		return func() {}
	}
}

// Executions reports the executions running on this replica and those
// queued behind MaxRunning.
func (r *Runner) Executions() (running, queued int) {
	return len(r.slots), int(r.queued.Load())
}

// stop cancels a local execution with a cause.
func (r *Runner) stop(id string, cause error) bool {
	r.mu.Lock()
	cancel, ok := r.running[id]
	r.mu.Unlock()
	if ok {
		cancel(cause)
	}
	return ok
}

// Cancel asks a running workflow to stop; it returns the workflow as it is
// once stopped, or after a few seconds if its owner has not stopped it yet.
// A waiting workflow is taken and ended here at once.
func (r *Runner) Cancel(ctx context.Context, tenant, id string) (*Workflow, error) {
	wf, taken, err := r.opts.Store.RequestCancel(ctx, tenant, id, r.opts.Owner, r.opts.Now().Add(r.opts.Lease))
	if err != nil || wf.Done() {
		return wf, err
	}
	if taken {
		r.stop(id, errCancel) // an external agent's call held here
		r.finish(context.WithoutCancel(ctx), wf, nil, nil, agent.Result{Outcome: OutcomeCancelled, Status: Cancelled}, nil)
		return r.opts.Store.Workflow(ctx, tenant, id)
	}
	r.stop(id, errCancel)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	done, err := r.Wait(wctx, tenant, id)
	if errors.Is(err, context.DeadlineExceeded) {
		return r.opts.Store.Workflow(ctx, tenant, id)
	}
	return done, err
}

// Wait returns the workflow once it has finished.
func (r *Runner) Wait(ctx context.Context, tenant, id string) (*Workflow, error) {
	wf, _, err := r.wait(ctx, tenant, id, false, false)
	return wf, err
}

// Finished returns the workflow and its steps once it has finished or
// waits for an approval.
func (r *Runner) Finished(ctx context.Context, tenant, id string) (*Workflow, []Step, error) {
	return r.wait(ctx, tenant, id, true, true)
}

// wait waits for the workflow's end. One running here hands its end to the
// waiter as it finishes, stored already, so nothing is read back; one
// running elsewhere (or already finished) is read from the store.
func (r *Runner) wait(ctx context.Context, tenant, id string, withSteps, settled bool) (*Workflow, []Step, error) {
	sub := r.hub.subscribe(id)
	defer r.hub.unsubscribe(id, sub)
	over := (*Workflow).Done
	if settled {
		over = (*Workflow).Settled
	}
	for {
		// An end handed over is for its own tenant's waiters; another
		// tenant's reads the store, which has no such workflow for it.
		if e := sub.end.Load(); e != nil && e.wf.Tenant == tenant && over(e.wf) {
			if e.steps == nil && withSteps {
				steps, err := r.opts.Store.Steps(ctx, id, 0)
				return e.wf, steps, err
			}
			return e.wf, e.steps, nil
		}
		// Subscribed first, so an execution still registered here will
		// hand over its end; one no longer registered has stored it.
		if !r.isRunning(id) {
			wf, err := r.opts.Store.Workflow(ctx, tenant, id)
			if err != nil {
				return nil, nil, err
			}
			if over(wf) {
				if !withSteps {
					return wf, nil, nil
				}
				steps, err := r.opts.Store.Steps(ctx, id, 0)
				return wf, steps, err
			}
		}
		if err := sub.wait(ctx, r.feed.poll()); err != nil {
			return nil, nil, err
		}
	}
}

// isRunning reports whether the workflow executes on this replica.
func (r *Runner) isRunning(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.running[id]
	return ok
}

// Close stops local executions without finishing their workflows and
// releases their leases, so a restarted server or another replica resumes
// them; it waits for the executions to return.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closing = true
	for _, cancel := range r.running {
		cancel(errShutdown)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
