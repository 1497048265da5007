package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// usageView is a workflow's usage: its completions' tokens and, when their
// models have a price in one currency, their cost.
type usageView struct {
	InputTokens  int64          `json:"input_tokens"`
	OutputTokens int64          `json:"output_tokens"`
	Completions  int            `json:"completions"`
	Cost         *workflow.Cost `json:"cost,omitempty"`
}

// completionView is a completion as GET /v1/workflows/{id} shows it.
type completionView struct {
	N             int            `json:"n"`
	Step          int            `json:"step"`
	Model         string         `json:"model"`
	ProviderModel string         `json:"provider_model,omitempty"`
	Request       map[string]any `json:"request,omitempty"`
	Response      map[string]any `json:"response"`
	Usage         agent.Usage    `json:"usage"`
	Cost          *workflow.Cost `json:"cost,omitempty"`
	FinishReason  string         `json:"finish_reason,omitempty"`
	CreatedAt     string         `json:"created_at,omitempty"`
	// ContentHidden says the messages are withheld: the caller may not
	// read every tool answer the conversation holds.
	ContentHidden bool `json:"content_hidden,omitempty"`
}

// workflowUsage sums the workflow's completions.
func workflowUsage(comps []workflow.Completion) *usageView {
	return usageOf(workflow.TotalCompletions(comps))
}

// usageOf shows a workflow's totals.
func usageOf(t workflow.CompletionTotals) *usageView {
	return &usageView{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, Completions: t.Completions, Cost: t.Cost}
}

// completionViews shows the workflow's completions; the messages of one
// are shown only to a caller who may read the answers of every tool the
// workflow called before it.
func completionViews(p auth.Principal, comps []workflow.Completion, steps []workflow.Step) []completionView {
	out := make([]completionView, 0, len(comps))
	for _, c := range comps {
		v := completionView{N: c.N, Step: c.Step, Model: c.Model, ProviderModel: c.ProviderModel,
			Usage: agent.Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens}, FinishReason: c.FinishReason}
		if c.Currency != "" {
			v.Cost = &workflow.Cost{Amount: c.Cost, Currency: c.Currency}
		}
		if !c.CreatedAt.IsZero() {
			v.CreatedAt = c.CreatedAt.UTC().Format(timeFormat)
		}
		v.ContentHidden = workflow.MessagesHidden(p, c, steps)
		if rc, err := agent.DecodeCompletion(c.Data); err == nil {
			if rc.Request != nil {
				v.Request = asObject(rc.Request)
			}
			v.Response = asObject(rc.Response)
		}
		if v.Response == nil {
			v.Response = map[string]any{}
		}
		if v.ContentHidden {
			delete(v.Request, "messages")
			delete(v.Response, "message")
		}
		out = append(out, v)
	}
	return out
}

// asObject is v as a JSON object's members.
func asObject(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// Bounds of a usage report.
const (
	defaultUsageDays = 30
	maxUsageDays     = 366
)

// usageGroup is one group of GET /v1/usage, named by its grouping.
type usageGroup struct {
	InputTokens  int64           `json:"input_tokens"`
	OutputTokens int64           `json:"output_tokens"`
	Completions  int64           `json:"completions"`
	Cost         []workflow.Cost `json:"cost"`
}

func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var errs []problem.FieldError
	until, since := s.deps.Now().UTC(), time.Time{}
	for _, t := range []struct {
		name string
		out  *time.Time
	}{{"since", &since}, {"until", &until}} {
		if v := q.Get(t.name); v != "" {
			tm, err := parseDayOrTime(v)
			if err != nil {
				errs = append(errs, problem.FieldError{Field: t.name, Message: "must be an RFC 3339 time or a date (2006-01-02)"})
			}
			*t.out = tm
		}
	}
	if since.IsZero() {
		since = until.AddDate(0, 0, -(defaultUsageDays - 1))
	}
	from, to := day(since), day(until)
	switch days := int(to.Sub(from).Hours()/24) + 1; {
	case len(errs) > 0:
	case days < 1:
		errs = append(errs, problem.FieldError{Field: "until", Message: "must not be before since"})
	case days > maxUsageDays:
		errs = append(errs, problem.FieldError{Field: "since", Message: fmt.Sprintf("the report covers at most %d days: move since or until", maxUsageDays)})
	}
	groupBy := q.Get("group_by")
	if groupBy == "" {
		groupBy = workflow.GroupByModel
	}
	switch groupBy {
	case workflow.GroupByAgent, workflow.GroupByModel, workflow.GroupByDay:
	default:
		errs = append(errs, problem.FieldError{Field: "group_by", Message: "must be agent, model or day"})
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	groups, err := s.deps.Workflows.Usage(r.Context(), frontdoor.Principal(r).Tenant, workflow.UsageQuery{Since: from, Until: to, GroupBy: groupBy})
	if err != nil {
		return err
	}
	resp := struct {
		Since   string           `json:"since"`
		Until   string           `json:"until"`
		GroupBy string           `json:"group_by"`
		Groups  []map[string]any `json:"groups"`
		Total   usageGroup       `json:"total"`
	}{Since: workflow.Day(from), Until: workflow.Day(to), GroupBy: groupBy, Groups: make([]map[string]any, 0, len(groups)),
		Total: usageGroup{Cost: []workflow.Cost{}}}
	totals := map[string]float64{}
	var currencies []string
	for _, g := range groups {
		m := asObject(usageGroup{InputTokens: g.InputTokens, OutputTokens: g.OutputTokens, Completions: g.Completions,
			Cost: append([]workflow.Cost{}, g.Cost...)})
		m[groupBy] = g.Key
		resp.Groups = append(resp.Groups, m)
		resp.Total.InputTokens += g.InputTokens
		resp.Total.OutputTokens += g.OutputTokens
		resp.Total.Completions += g.Completions
		for _, c := range g.Cost {
			if _, ok := totals[c.Currency]; !ok {
				currencies = append(currencies, c.Currency)
			}
			totals[c.Currency] += c.Amount
		}
	}
	for _, c := range currencies {
		resp.Total.Cost = append(resp.Total.Cost, workflow.Cost{Amount: totals[c], Currency: c})
	}
	return frontdoor.WriteJSON(w, http.StatusOK, resp)
}

// parseDayOrTime reads an RFC 3339 time or a date.
func parseDayOrTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

// day is t's UTC date at midnight.
func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
