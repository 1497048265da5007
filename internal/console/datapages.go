package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// The console's pages of agents, tools, models and usage, schedules and
// webhooks, and the audit log: each reads through the same store calls as
// the API route it is audited as, and its actions (promoting a version,
// pausing or resuming a schedule, retrying a delivery) are those routes.

// agentsPage is the agent list's data.
type agentsPage struct {
	Rows []*agent.Agent
	Next string
}

// Agents is the page of the tenant's agents, by name.
func (c *Console) Agents(w http.ResponseWriter, r *http.Request) error {
	after := r.URL.Query().Get("cursor")
	as, err := c.svc.Agents.ListAgents(r.Context(), frontdoor.Principal(r).Tenant, after, 50)
	if err != nil {
		return err
	}
	data := agentsPage{Rows: as}
	if len(as) == 50 {
		data.Next = "/console/agents?" + url.Values{"cursor": {as[len(as)-1].Name}}.Encode()
	}
	return render(w, r, "agents", Page{Title: "Agents", Nav: "agents", Data: data})
}

// agentPage is one agent's data: its versions, newest first, and the one
// shown (the default unless ?version= names another), readably.
type agentPage struct {
	Name     string
	Versions []*agent.Version
	Shown    *agent.Version
	Sections []agent.DiffSection
	// From and To preselect the diff form: the shown version and the one
	// before it.
	From, To string
	// Rollout is the agent's newest rollout with its arms, nil when it
	// has had none.
	Rollout *rollout.View
}

// Agent is one agent's page: its versions and one of them, readably: its
// definition, or an external version's endpoint and governance.
func (c *Console) Agent(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	name, err := agent.UnpinnedName(r.PathValue("id"))
	if err != nil {
		return err
	}
	vs, err := c.svc.Agents.ListVersions(r.Context(), tenant, name)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return problem.New(problem.NotFound, "no agent named %q", name)
	}
	data := agentPage{Name: name, Versions: vs, Shown: vs[0]}
	want := r.URL.Query().Get("version")
	for i, v := range vs {
		if (want == "" && v.Default) || v.Version == want {
			data.Shown = v
			if i+1 < len(vs) {
				data.From = vs[i+1].Version
			}
		}
	}
	if want != "" && data.Shown.Version != want {
		return problem.New(problem.NotFound, "agent %s has no version %q", name, want)
	}
	data.To = data.Shown.Version
	if data.From == "" {
		data.From = data.To
	}
	d, err := agent.DiffVersions(data.Shown, data.Shown)
	if err != nil {
		return err
	}
	data.Sections = d.Sections
	if c.svc.Rollouts != nil {
		data.Rollout, err = c.svc.Rollouts.Get(r.Context(), tenant, name)
		if problem.Is(err, problem.NotFound) {
			data.Rollout, err = nil, nil
		}
		if err != nil {
			return err
		}
	}
	return render(w, r, "agent", Page{Title: "Agent " + name, Nav: "agents", Data: data})
}

// agentDiffPage is the side-by-side diff of two versions.
type agentDiffPage struct {
	Name     string
	Versions []*agent.Version
	From, To string
	Diff     *agent.VersionDiff
}

// AgentDiff shows two versions of an agent side by side (?from=&to=).
func (c *Console) AgentDiff(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	name, err := agent.UnpinnedName(r.PathValue("id"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	from, to := q.Get("from"), q.Get("to")
	var errs []problem.FieldError
	for _, p := range []struct{ field, v string }{{"from", from}, {"to", to}} {
		if p.v == "" {
			errs = append(errs, problem.FieldError{Field: p.field, Message: "is required: a version of " + name})
		}
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	a, err := c.svc.Agents.AgentVersion(r.Context(), tenant, name, from)
	if err != nil {
		return err
	}
	b, err := c.svc.Agents.AgentVersion(r.Context(), tenant, name, to)
	if err != nil {
		return err
	}
	vs, err := c.svc.Agents.ListVersions(r.Context(), tenant, name)
	if err != nil {
		return err
	}
	d, err := agent.DiffVersions(a, b)
	if err != nil {
		return err
	}
	data := agentDiffPage{Name: name, Versions: vs, From: from, To: to, Diff: d}
	return render(w, r, "agentdiff", Page{Title: "Agent " + name + ": " + from + " → " + to, Nav: "agents", Data: data})
}

// toolsPage is the tools and the operation search.
type toolsPage struct {
	Tools  []*tool.Tool
	Q      string
	Tool   string
	Result *operationsFound
}

// operationsFound is what the operation search found.
type operationsFound struct {
	Operations []Operation
}

// Tools is the page of the tenant's tools and the search of their
// operations.
func (c *Console) Tools(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	q := r.URL.Query()
	tools, err := c.svc.Tools.ListTools(r.Context(), tenant, tool.ListOptions{Limit: 200})
	if err != nil {
		return err
	}
	data := toolsPage{Tools: tools, Q: strings.TrimSpace(q.Get("q")), Tool: q.Get("tool")}
	if data.Q != "" || data.Tool != "" {
		ops, err := c.svc.SearchOperations(r.Context(), tenant, data.Tool, data.Q)
		if err != nil {
			return err
		}
		for i := range ops {
			ops[i].Input = prettyRaw(ops[i].Input)
			ops[i].Output = prettyRaw(ops[i].Output)
		}
		data.Result = &operationsFound{Operations: ops}
	}
	return render(w, r, "tools", Page{Title: "Tools", Nav: "tools", Data: data})
}

// prettyRaw is raw indented for reading.
func prettyRaw(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	return []byte(Pretty(raw))
}

// usagePage is the models and the usage charts.
type usagePage struct {
	Models     []*model.Model
	By         string
	Days       int
	DayChoices []int
	Charts     []UsageChart
}

// usageDayChoices are the periods the usage page offers.
var usageDayChoices = []int{7, 30, 90}

// Usage is the page of the models and the tenant's usage over time.
func (c *Console) Usage(w http.ResponseWriter, r *http.Request) error {
	p := frontdoor.Principal(r)
	q := r.URL.Query()
	data := usagePage{By: workflow.GroupByAgent, Days: 30, DayChoices: usageDayChoices}
	if q.Get("by") == workflow.GroupByModel {
		data.By = workflow.GroupByModel
	}
	for _, d := range usageDayChoices {
		if q.Get("days") == strconv.Itoa(d) {
			data.Days = d
		}
	}
	until := c.svc.Now().UTC()
	u, err := LoadUsage(r.Context(), c.svc.Workflows, p.Tenant, data.By, until.AddDate(0, 0, 1-data.Days), until)
	if err != nil {
		return err
	}
	data.Charts = UsageCharts(u)
	if p.Has("models:read") {
		if data.Models, err = c.svc.Models.List(r.Context(), p.Tenant, model.ListOptions{Limit: 200}); err != nil {
			return err
		}
	}
	return render(w, r, "usage", Page{Title: "Models and usage", Nav: "usage", Data: data})
}

// auditPage is the audit query's data; Verify the chain's state
// when the reader asked for it.
type auditPage struct {
	Filter   audit.Query
	Outcomes []string
	Records  []audit.Record
	Next     string
	Verify   *audit.Report
}

// Audit is the page of the audit query.
func (c *Console) Audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var aq audit.Query
	api := url.Values{}
	for _, k := range audit.QueryParams {
		if v := strings.TrimSpace(q.Get(k)); v != "" {
			api.Set(k, v)
		}
	}
	for _, k := range []string{"since", "until"} {
		if t, err := time.Parse(localTime, api.Get(k)); err == nil {
			api.Set(k, t.UTC().Format(time.RFC3339))
		}
	}
	if err := aq.FromValues(api); err != nil {
		return err
	}
	f, err := aq.Filter()
	if err != nil {
		return err
	}
	aq.Since, aq.Until = q.Get("since"), q.Get("until") // as typed
	recs, err := c.svc.Audit.QueryAudit(r.Context(), frontdoor.Principal(r).Tenant, f)
	if err != nil {
		return err
	}
	data := auditPage{Filter: aq, Records: recs, Outcomes: []string{"", audit.Success, audit.Denied, audit.Error}}
	if len(recs) == f.Limit && len(recs) > 0 {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("cursor", audit.EncodeCursor(recs[len(recs)-1].Seq))
		data.Next = "/console/audit?" + next.Encode()
	}
	return render(w, r, "audit", Page{Title: "Audit log", Nav: "audit", Data: data})
}

// AuditVerify shows the state of the tenant's audit chain.
func (c *Console) AuditVerify(w http.ResponseWriter, r *http.Request) error {
	rep, err := audit.Verify(r.Context(), c.svc.Audit, frontdoor.Principal(r).Tenant)
	if err != nil {
		return err
	}
	return render(w, r, "audit", Page{Title: "Audit log: verify", Nav: "audit", Data: auditPage{Verify: &rep}})
}

// schedulesPage is the schedules, by id.
type schedulesPage struct {
	Rows []*schedule.Schedule
}

// Schedules is the page of the tenant's schedules.
func (c *Console) Schedules(w http.ResponseWriter, r *http.Request) error {
	if c.svc.Schedules == nil {
		return problem.New(problem.Unavailable, "schedules are not enabled on this server")
	}
	all, err := c.svc.Schedules.List(r.Context(), frontdoor.Principal(r).Tenant)
	if err != nil {
		return err
	}
	return render(w, r, "schedules", Page{Title: "Schedules", Nav: "schedules", Data: schedulesPage{Rows: all}})
}

// webhooks is the webhook service, problem.Unavailable without one.
func (c *Console) webhooks() (*webhook.Service, error) {
	if c.svc.Webhooks == nil {
		return nil, problem.New(problem.Unavailable, "webhooks are not enabled on this server")
	}
	return c.svc.Webhooks, nil
}

// webhooksPage is the webhooks and, for the one opened, its latest
// deliveries.
type webhooksPage struct {
	Rows       []*webhook.Webhook
	Open       *webhook.Webhook
	Status     string
	Statuses   []string
	Deliveries []*webhook.Delivery
}

// Webhooks is the page of the tenant's webhooks.
func (c *Console) Webhooks(w http.ResponseWriter, r *http.Request) error {
	svc, err := c.webhooks()
	if err != nil {
		return err
	}
	all, err := svc.Store.ListWebhooks(r.Context(), frontdoor.Principal(r).Tenant)
	if err != nil {
		return err
	}
	return render(w, r, "webhooks", Page{Title: "Webhooks", Nav: "webhooks", Data: webhooksPage{Rows: all}})
}

// Webhook is one webhook's page, with its latest deliveries.
func (c *Console) Webhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := c.webhooks()
	if err != nil {
		return err
	}
	tenant := frontdoor.Principal(r).Tenant
	wh, err := svc.Store.Webhook(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	data := webhooksPage{Open: wh, Status: r.URL.Query().Get("status"), Statuses: []string{"", webhook.Pending, webhook.Delivered, webhook.Failed}}
	if !slices.Contains(data.Statuses, data.Status) {
		return problem.Field("status", "must be pending, delivered or failed")
	}
	if data.Deliveries, err = svc.Store.Deliveries(r.Context(), tenant, wh.ID, data.Status, 50); err != nil {
		return err
	}
	live := ""
	for _, d := range data.Deliveries {
		if d.Status == webhook.Pending {
			live = "poll"
		}
	}
	return render(w, r, "webhooks", Page{Title: "Webhook " + wh.ID, Nav: "webhooks", Live: live, Data: data})
}
