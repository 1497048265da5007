package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
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

func (s *Server) handleConsoleAgents(w http.ResponseWriter, r *http.Request) error {
	after := r.URL.Query().Get("cursor")
	as, err := s.deps.Agents.ListAgents(r.Context(), frontdoor.Principal(r).Tenant, after, 50)
	if err != nil {
		return err
	}
	data := agentsPage{Rows: as}
	if len(as) == 50 {
		data.Next = "/console/agents?" + url.Values{"cursor": {as[len(as)-1].Name}}.Encode()
	}
	return renderConsole(w, r, "agents", console.Page{Title: "Agents", Nav: "agents", Data: data})
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
}

func (s *Server) handleConsoleAgent(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	name, err := agent.UnpinnedName(r.PathValue("id"))
	if err != nil {
		return err
	}
	vs, err := s.deps.Agents.ListVersions(r.Context(), tenant, name)
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
	return renderConsole(w, r, "agent", console.Page{Title: "Agent " + name, Nav: "agents", Data: data})
}

// agentDiffPage is the side-by-side diff of two versions.
type agentDiffPage struct {
	Name     string
	Versions []*agent.Version
	From, To string
	Diff     *agent.VersionDiff
}

func (s *Server) handleConsoleAgentDiff(w http.ResponseWriter, r *http.Request) error {
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
	a, err := s.deps.Agents.AgentVersion(r.Context(), tenant, name, from)
	if err != nil {
		return err
	}
	b, err := s.deps.Agents.AgentVersion(r.Context(), tenant, name, to)
	if err != nil {
		return err
	}
	vs, err := s.deps.Agents.ListVersions(r.Context(), tenant, name)
	if err != nil {
		return err
	}
	d, err := agent.DiffVersions(a, b)
	if err != nil {
		return err
	}
	data := agentDiffPage{Name: name, Versions: vs, From: from, To: to, Diff: d}
	return renderConsole(w, r, "agentdiff", console.Page{Title: "Agent " + name + ": " + from + " → " + to, Nav: "agents", Data: data})
}

// formDefault is the promote form as PUT /v1/agents/{id}/default's body.
func formDefault(f url.Values) (any, error) {
	return map[string]string{"version": f.Get("version")}, nil
}

// toolsPage is the tools and the operation search.
type toolsPage struct {
	Tools  []*tool.Tool
	Q      string
	Tool   string
	Result *operationPage
}

func (s *Server) handleConsoleTools(w http.ResponseWriter, r *http.Request) error {
	tenant := frontdoor.Principal(r).Tenant
	q := r.URL.Query()
	tools, err := s.deps.ToolStore.ListTools(r.Context(), tenant, tool.ListOptions{Limit: 200})
	if err != nil {
		return err
	}
	data := toolsPage{Tools: tools, Q: strings.TrimSpace(q.Get("q")), Tool: q.Get("tool")}
	if data.Q != "" || data.Tool != "" {
		oq := opQuery{q: data.Q, limit: defaultOpLimit, full: true}
		if errs := oq.check(); len(errs) > 0 {
			return problem.Validation(errs...)
		}
		pg, err := s.searchOperations(r.Context(), tenant, data.Tool, oq)
		if err != nil {
			return err
		}
		for i := range pg.Operations {
			pg.Operations[i].Input = prettyRaw(pg.Operations[i].Input)
			pg.Operations[i].Output = prettyRaw(pg.Operations[i].Output)
		}
		data.Result = &pg
	}
	return renderConsole(w, r, "tools", console.Page{Title: "Tools", Nav: "tools", Data: data})
}

// prettyRaw is raw indented for reading.
func prettyRaw(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	return []byte(console.Pretty(raw))
}

// usagePage is the models and the usage charts.
type usagePage struct {
	Models     []*model.Model
	By         string
	Days       int
	DayChoices []int
	Charts     []console.UsageChart
}

// usageDayChoices are the periods the usage page offers.
var usageDayChoices = []int{7, 30, 90}

func (s *Server) handleConsoleUsage(w http.ResponseWriter, r *http.Request) error {
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
	until := s.deps.Now().UTC()
	u, err := console.LoadUsage(r.Context(), s.deps.Workflows, p.Tenant, data.By, until.AddDate(0, 0, 1-data.Days), until)
	if err != nil {
		return err
	}
	data.Charts = console.UsageCharts(u)
	if p.Has("models:read") {
		if data.Models, err = s.deps.Models.List(r.Context(), p.Tenant, model.ListOptions{Limit: 200}); err != nil {
			return err
		}
	}
	return renderConsole(w, r, "usage", console.Page{Title: "Models and usage", Nav: "usage", Data: data})
}

// auditConsolePage is the audit query's data; Verify the chain's state
// when the reader asked for it.
type auditConsolePage struct {
	Filter   audit.Query
	Outcomes []string
	Records  []audit.Record
	Next     string
	Verify   *audit.Report
}

func (s *Server) handleConsoleAudit(w http.ResponseWriter, r *http.Request) error {
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
	recs, err := s.deps.Store.QueryAudit(r.Context(), frontdoor.Principal(r).Tenant, f)
	if err != nil {
		return err
	}
	data := auditConsolePage{Filter: aq, Records: recs, Outcomes: []string{"", audit.Success, audit.Denied, audit.Error}}
	if len(recs) == f.Limit && len(recs) > 0 {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("cursor", audit.EncodeCursor(recs[len(recs)-1].Seq))
		data.Next = "/console/audit?" + next.Encode()
	}
	return renderConsole(w, r, "audit", console.Page{Title: "Audit log", Nav: "audit", Data: data})
}

func (s *Server) handleConsoleAuditVerify(w http.ResponseWriter, r *http.Request) error {
	rep, err := audit.Verify(r.Context(), s.deps.Store, frontdoor.Principal(r).Tenant)
	if err != nil {
		return err
	}
	return renderConsole(w, r, "audit", console.Page{Title: "Audit log: verify", Nav: "audit", Data: auditConsolePage{Verify: &rep}})
}

// schedulesPage is the schedules, by id.
type schedulesPage struct {
	Rows []*schedule.Schedule
}

func (s *Server) handleConsoleSchedules(w http.ResponseWriter, r *http.Request) error {
	all, err := s.tenantSchedules(r)
	if err != nil {
		return err
	}
	return renderConsole(w, r, "schedules", console.Page{Title: "Schedules", Nav: "schedules", Data: schedulesPage{Rows: all}})
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

func (s *Server) handleConsoleWebhooks(w http.ResponseWriter, r *http.Request) error {
	all, err := s.tenantWebhooks(r)
	if err != nil {
		return err
	}
	return renderConsole(w, r, "webhooks", console.Page{Title: "Webhooks", Nav: "webhooks", Data: webhooksPage{Rows: all}})
}

func (s *Server) handleConsoleWebhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
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
	return renderConsole(w, r, "webhooks", console.Page{Title: "Webhook " + wh.ID, Nav: "webhooks", Live: live, Data: data})
}
