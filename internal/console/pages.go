package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/web"
	"github.com/agentplane/agentplane/internal/workflow"
)

// The console's pages: each reads through the same store calls and views
// as the API route it is audited as.

// localTime is the value of an <input type="datetime-local">, read as UTC.
const localTime = "2006-01-02T15:04"

// workflowsPage is the workflow list's data.
type workflowsPage struct {
	Filter   workflowsFilter
	Statuses []string
	Rows     []workflowRow
	Next     string
}

// workflowRow is a workflow of the list, its duration measured up to now
// while it runs.
type workflowRow struct {
	*workflow.Workflow
	DurationMS int64
}

// workflowsFilter is the filters as the reader typed them. Version is a
// version number of Agent, as the API's filter takes it.
type workflowsFilter struct {
	Agent, Version, Status, Outcome, Since, Until, Q string
}

// Workflows is the workflow list, with the API's filters.
func (c *Console) Workflows(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	shown := workflowsFilter{Agent: q.Get("agent"), Version: q.Get("version"), Status: q.Get("status"), Outcome: q.Get("outcome"),
		Since: q.Get("since"), Until: q.Get("until"), Q: q.Get("q")}
	api := url.Values{}
	for k, vs := range q {
		if v := strings.TrimSpace(vs[0]); v != "" {
			api.Set(k, v)
		}
	}
	for _, k := range []string{"since", "until"} {
		if t, err := time.Parse(localTime, api.Get(k)); err == nil {
			api.Set(k, t.UTC().Format(time.RFC3339))
		}
	}
	f, err := workflow.ParseListFilter(api)
	if err != nil {
		return err
	}
	wfs, err := c.svc.Workflows.ListWorkflows(r.Context(), frontdoor.Principal(r).Tenant, f)
	if err != nil {
		return err
	}
	data := workflowsPage{Filter: shown,
		Statuses: []string{"", workflow.Running, workflow.Waiting, workflow.Completed, workflow.Failed, workflow.Cancelled}}
	if len(wfs) == f.Limit {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("cursor", wfs[len(wfs)-1].ID)
		data.Next = "/console/workflows?" + next.Encode()
	}
	live := ""
	now := c.svc.Now()
	for _, wf := range wfs {
		data.Rows = append(data.Rows, workflowRow{Workflow: wf, DurationMS: wf.DurationMS(now)})
		if !wf.Done() {
			live = "poll"
		}
	}
	return render(w, r, "workflows", Page{Title: "Workflows", Nav: "workflows", Live: live, Data: data})
}

// workflowPage is one workflow's data.
type workflowPage struct {
	*workflow.Workflow
	DurationMS   int64
	Finished     bool
	Invoker      string
	Usage        *usageLine
	Output       string
	Error        string
	Steps        []stepLine
	Conversation []web.Turn
	Approvals    []*workflow.Approval
	Replays      []replayLine
	// Gaps are the waits the timeline collapses (GapAfter the one after
	// the last step); ScaledMS the time its bars are scaled to.
	Gaps     []*gapLine
	GapAfter *gapLine
	ScaledMS int64
	Versions []string
	// ReplayTarget is the version the replay form offers first.
	ReplayTarget string
}

type usageLine struct {
	InputTokens, OutputTokens int64
	Completions               int
	Cost                      string
}

// stepLine is a step with its bar on the timeline: BarX and BarW are its
// start and length in thousandths of the timeline (layoutTimeline); Gap
// is the wait collapsed just before it.
type stepLine struct {
	workflow.Step
	// N is the step's number (Step is the step itself).
	N                     int
	Hidden                bool
	Args, Request, Result string
	BarX, BarW            int64
	Gap                   *gapLine
}

// replayLine is a replay as the workflow's page lists it, the same for a
// defined and an external target: its outcomes, delta and unrecorded
// calls, and for an external target the URL that ran.
type replayLine struct {
	*replay.Replay
	Viewer string
	// TargetURL is the external agent the replay invoked ("" for a
	// defined version); Unrecorded counts the replay's calls and
	// completions the record had no answer for.
	TargetURL  string
	Unrecorded int
}

// newReplayLine is rp's line, its viewer link signed for tools (those
// whose bodies the reader may see).
func (c *Console) newReplayLine(ctx context.Context, rp *replay.Replay, tools []string) replayLine {
	line := replayLine{Replay: rp, Viewer: c.svc.Viewer.ReplayURL(c.svc.PublicURL, rp.ID, tools),
		TargetURL: web.TargetURL(ctx, c.svc.Agents, rp.Tenant, rp.Target)}
	for _, e := range rp.Steps {
		if e.Replay != nil && e.Replay.Status == agent.StatusUnrecorded {
			line.Unrecorded++
		}
	}
	return line
}

// Workflow is one workflow's page: its steps, conversation, usage,
// approvals and replays.
func (c *Console) Workflow(w http.ResponseWriter, r *http.Request) error {
	p := frontdoor.Principal(r)
	wf, err := c.svc.Workflows.Workflow(r.Context(), p.Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	steps, err := c.svc.Workflows.Steps(r.Context(), wf.ID, 0)
	if err != nil {
		return err
	}
	now := c.svc.Now()
	data := workflowPage{Workflow: wf, DurationMS: wf.DurationMS(now), Finished: wf.Done(), Invoker: wf.Caller.Sub,
		Output: pretty(wf.Output), Error: pretty(wf.Error)}
	if data.Invoker == "" {
		data.Invoker = wf.Caller.ClientID
	}
	tl := layoutTimeline(wf, steps, data.DurationMS)
	data.Gaps, data.GapAfter, data.ScaledMS = tl.Gaps, tl.After, tl.ScaledMS
	for i, st := range steps {
		line := stepLine{Step: st, N: st.Step, BarX: tl.Bars[i][0], BarW: tl.Bars[i][1], Gap: tl.Before[i]}
		if workflow.BodiesHidden(p, st) {
			line.Hidden = true
		} else {
			line.Args, line.Request, line.Result = pretty(st.Args), pretty(st.Request), pretty(st.Result)
		}
		data.Steps = append(data.Steps, line)
	}
	comps, err := c.svc.Workflows.WorkflowCompletions(r.Context(), wf.ID)
	if err != nil {
		return err
	}
	if len(comps) > 0 {
		u := workflow.TotalCompletions(comps)
		data.Usage = &usageLine{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Completions: u.Completions}
		if u.Cost != nil {
			data.Usage.Cost = fmt.Sprintf("%.4f %s", u.Cost.Amount, u.Cost.Currency)
		}
		data.Conversation = web.Conversation(replayCompletions(comps, steps, p), web.NewTools(p.Tools()...))
	}
	if data.Approvals, err = c.svc.Workflows.WorkflowApprovals(r.Context(), wf.ID); err != nil {
		return err
	}
	if p.Has("workflows:replay") {
		rps, err := c.svc.Replays.ListReplays(r.Context(), p.Tenant, replay.ListFilter{WorkflowID: wf.ID, Limit: 20})
		if err != nil {
			return err
		}
		for _, rp := range rps {
			data.Replays = append(data.Replays, c.newReplayLine(r.Context(), rp, p.Tools()))
		}
		vs, err := c.svc.Agents.ListVersions(r.Context(), p.Tenant, wf.Agent)
		if err != nil {
			return err
		}
		data.ReplayTarget = wf.AgentVersion
		for _, v := range vs {
			data.Versions = append(data.Versions, v.Version)
			// The newest other live version is the replay form's default:
			// replaying a run against its own version is the rarer ask.
			if data.ReplayTarget == wf.AgentVersion && v.Version != wf.AgentVersion && v.ArchivedAt == nil {
				data.ReplayTarget = v.Version
			}
		}
	}
	live := ""
	if !wf.Done() {
		live = "sse:/console/workflows/" + url.PathEscape(wf.ID) + "/events"
	}
	return render(w, r, "workflow", Page{Title: "Workflow " + wf.ID, Nav: "workflows", Live: live, Data: data})
}

// replayCompletions are a workflow's completions as the conversation view
// reads them; a completion after a call of a tool the reader may not use
// keeps no messages.
func replayCompletions(comps []workflow.Completion, steps []workflow.Step, reader workflow.Reader) []replay.Completion {
	out := make([]replay.Completion, 0, len(comps))
	for _, c := range comps {
		rc := replay.Completion{N: c.N, Step: c.Step}
		if c.Currency != "" {
			rc.Cost = &workflow.Cost{Amount: c.Cost, Currency: c.Currency}
		}
		if dec, err := agent.DecodeCompletion(c.Data); err == nil {
			rc.Request, rc.Response = dec.Request, dec.Response
		}
		rc.MessagesHidden = workflow.MessagesHidden(reader, c, steps)
		out = append(out, rc)
	}
	return out
}

// pretty is JSON indented for reading; "" for none.
func pretty(raw []byte) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return Pretty(raw)
}

// approvalsPage is the approvals list's data.
type approvalsPage struct {
	Decided bool
	Rows    []*workflow.Approval
	Next    string
}

// Approvals is the list of pending approvals (?status=decided: the
// decided ones).
func (c *Console) Approvals(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := workflow.ApprovalFilter{Status: workflow.ApprovalPending, Agent: q.Get("agent"), After: q.Get("cursor"), Limit: 50}
	decided := q.Get("status") == "decided"
	if decided {
		f.Status = "decided"
	}
	if _, _, ok := workflow.ParseApprovalCursor(f.After); f.After != "" && !ok {
		f.After = ""
	}
	as, err := c.svc.Workflows.Approvals(r.Context(), frontdoor.Principal(r).Tenant, f)
	if err != nil {
		return err
	}
	data := approvalsPage{Decided: decided, Rows: as}
	if len(as) == f.Limit {
		next := url.Values{"cursor": {workflow.ApprovalCursor(as[len(as)-1])}}
		if decided {
			next.Set("status", "decided")
		}
		data.Next = "/console/approvals?" + next.Encode()
	}
	live := ""
	if !decided {
		live = "poll"
	}
	return render(w, r, "approvals", Page{Title: "Approvals", Nav: "approvals", Live: live, Data: data})
}
