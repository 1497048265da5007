package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Where a replay's completions come from (a request's llm).
const (
	LLMRecorded = "recorded"
	LLMLive     = "live"
)

// What a replay does with a tool call that has no recorded answer (a
// request's unrecorded_calls).
const (
	UnrecordedSkip = "skip"
	UnrecordedRead = "read"
)

// Mode is how a replay serves completions and unrecorded calls.
type Mode struct {
	// LLM is LLMRecorded (the default) or LLMLive.
	LLM string `json:"llm,omitempty"`
	// UnrecordedCalls is UnrecordedSkip (the default) or UnrecordedRead.
	UnrecordedCalls string `json:"unrecorded_calls,omitempty"`
}

// WithDefaults is m with its empty members set to their defaults.
func (m Mode) WithDefaults() Mode {
	if m.LLM == "" {
		m.LLM = LLMRecorded
	}
	if m.UnrecordedCalls == "" {
		m.UnrecordedCalls = UnrecordedSkip
	}
	return m
}

// Check names each member of m that holds neither of its values.
func (m Mode) Check() []problem.FieldError {
	var errs []problem.FieldError
	if m.LLM != "" && m.LLM != LLMRecorded && m.LLM != LLMLive {
		errs = append(errs, problem.FieldError{Field: "llm",
			Message: strconv.Quote(m.LLM) + " is not recorded (serve completions from the record, the default) or live (request them from the target's models now)"})
	}
	if m.UnrecordedCalls != "" && m.UnrecordedCalls != UnrecordedSkip && m.UnrecordedCalls != UnrecordedRead {
		errs = append(errs, problem.FieldError{Field: "unrecorded_calls",
			Message: strconv.Quote(m.UnrecordedCalls) + " is not skip (calls without a recorded answer are not made, the default) or read (read operations among them are made live)"})
	}
	return errs
}

// Live reports whether m requests completions now.
func (m Mode) Live() bool { return m.LLM == LLMLive }

// Cost is what tokens cost, in one currency.
type Cost = workflow.Cost

// Models requests a what-if replay's completions from the target version's
// models now. The server implements it over the model registry, the
// provider clients, the budgets (a completion past the tenant's daily
// budget is an *agent.BudgetError) and usage accounting; the cost is nil
// when the model has no price. Errors are those of agent.Completer.
type Models interface {
	// Complete requests a completion for the tenant's agent (the target
	// version's, whose usage it counts toward).
	Complete(ctx context.Context, tenant, agent string, step, n int, req agent.ChatRequest) (agent.ChatResponse, *Cost, error)
}

// Reader makes a replay's unrecorded read calls live, through the path
// real workflows call tools by, under the original workflow's caller and
// the tool's credentials. It refuses (status unrecorded) any operation
// that is not registered as a read: a dry run never sends a write.
type Reader interface {
	Read(ctx context.Context, wf *workflow.Workflow, c agent.ToolCall) (agent.CallResult, tool.CallResult, error)
}

// Journal keeps a batch item's live completions as they arrive, so that a
// batch resumed after a crash serves them again rather than requesting
// them twice.
type Journal interface {
	// Journaled returns the completions journaled for the item.
	Journaled(ctx context.Context) ([]Completion, error)
	// Keep journals one completion before it is used.
	Keep(ctx context.Context, c Completion) error
}

// Completion is one completion of a replay: the request the target
// version made, the answer and its cost. Original completions (those of
// the replayed workflow) have no Request when the record holds none.
type Completion struct {
	N             int                `json:"n"`
	Step          int                `json:"step,omitempty"`
	RequestSHA256 string             `json:"request_sha256,omitempty"`
	Request       *agent.ChatRequest `json:"request,omitempty"`
	Response      agent.ChatResponse `json:"response"`
	Cost          *Cost              `json:"cost,omitempty"`
	// MessagesHidden says the messages were left out for this reader.
	MessagesHidden bool `json:"messages_hidden,omitempty"`
	// Wire is, in a batch's journal only, an external dry run's exchange
	// as relayed, which the gateway serves again when the batch resumes.
	Wire json.RawMessage `json:"wire,omitempty"`
}

// Usage is the tokens and cost of a run's completions.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Completions  int   `json:"completions"`
	Cost         *Cost `json:"cost,omitempty"`
}

// Usages are the usage of the original run and of its replay.
type Usages struct {
	Original Usage `json:"original"`
	Replay   Usage `json:"replay"`
}

// Add counts one completion in u.
func (u *Usage) Add(resp agent.ChatResponse, c *Cost) {
	u.Completions++
	if resp.Usage != nil {
		u.InputTokens += resp.Usage.InputTokens
		u.OutputTokens += resp.Usage.OutputTokens
	}
	u.addCost(c, u.Completions == 1)
}

// addCost adds c to u's cost; first says u had no completion before. A
// cost is kept only while every completion has one, in one currency.
func (u *Usage) addCost(c *Cost, first bool) {
	switch {
	case first && c != nil:
		u.Cost = &Cost{Amount: c.Amount, Currency: c.Currency}
	case c == nil || u.Cost == nil || u.Cost.Currency != c.Currency:
		u.Cost = nil
	default:
		u.Cost.Amount += c.Amount
	}
}

// usageOf sums completions.
func usageOf(cs []Completion) Usage {
	var u Usage
	for _, c := range cs {
		u.Add(c.Response, c.Cost)
	}
	return u
}

// originalCompletions decodes a workflow's recorded completions in order,
// with the cost a record carries beside its response.
func originalCompletions(recorded map[int]json.RawMessage) ([]Completion, error) {
	out := make([]Completion, 0, len(recorded))
	for n := 1; n <= len(recorded); n++ {
		raw := recorded[n]
		rc, err := agent.DecodeCompletion(raw)
		if err != nil {
			return nil, err
		}
		var extra struct {
			Step    int                `json:"step"`
			Request *agent.ChatRequest `json:"request"`
			Cost    *Cost              `json:"cost"`
		}
		_ = json.Unmarshal(raw, &extra) // older records have none of these
		out = append(out, Completion{N: n, Step: extra.Step, RequestSHA256: rc.RequestSHA256, Request: extra.Request,
			Response: rc.Response, Cost: extra.Cost})
	}
	return out, nil
}

// UsageTotals is what a store sums over one side (original or replay) of a
// batch's replays, to make that side's Usage.
type UsageTotals struct {
	InputTokens, OutputTokens, Completions int64
	// Used counts the replays with a completion on this side, Priced those
	// of them with a cost; Cost sums the costs, whose currencies run from
	// MinCurrency to MaxCurrency.
	Used, Priced             int64
	Cost                     float64
	MinCurrency, MaxCurrency string
}

// Usage is the side's usage: a cost only when every replay with a
// completion had one, all in one currency.
func (t UsageTotals) Usage() Usage {
	u := Usage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, Completions: int(t.Completions)}
	if t.Used > 0 && t.Priced == t.Used && t.MinCurrency == t.MaxCurrency {
		u.Cost = &Cost{Amount: t.Cost, Currency: t.MinCurrency}
	}
	return u
}

// UsageSides are the JSON paths of a replay's two usages, in Usages order.
var UsageSides = [2]string{"original", "replay"}

// Tools names the tools whose calls or answers the completion's
// conversation holds (from the function names, tool__operation).
func (c Completion) Tools() []string {
	var names []string
	add := func(m agent.ChatMessage) {
		for _, tc := range m.ToolCalls {
			if name, _, ok := strings.Cut(tc.Name, "__"); ok && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	if c.Request != nil {
		for _, m := range c.Request.Messages {
			add(m)
		}
	}
	add(c.Response.Message)
	return names
}

// Hidden is c without its messages, for a reader who may not see the
// answers of every tool in it.
func (c Completion) Hidden() Completion {
	c.Request, c.MessagesHidden = nil, true
	c.Response.Message = agent.ChatMessage{Role: c.Response.Message.Role}
	return c
}

// LiveCompleter requests completions outside any workflow's history, as
// workflow.Runner's LiveCompletion does: the tenant's model, within its
// daily budget, counted in the tenant's usage.
type LiveCompleter interface {
	LiveCompletion(ctx context.Context, tenant, agent string, req agent.ChatRequest) (agent.ChatResponse, *model.Model, error)
}

// RunnerModels is Models over the workflow runner's model path, so a live
// replay's completions are requested, budgeted and counted exactly as a
// workflow's are; the cost is the model's price of the tokens.
type RunnerModels struct{ Runner LiveCompleter }

// Complete implements Models.
func (m RunnerModels) Complete(ctx context.Context, tenant, agentName string, _, _ int, req agent.ChatRequest) (agent.ChatResponse, *Cost, error) {
	resp, mdl, err := m.Runner.LiveCompletion(ctx, tenant, agentName, req)
	if err != nil || mdl == nil || mdl.Price == nil {
		return resp, nil, err
	}
	var in, out int64
	if resp.Usage != nil {
		in, out = resp.Usage.InputTokens, resp.Usage.OutputTokens
	}
	return resp, &Cost{Amount: mdl.Price.Cost(in, out), Currency: cmp.Or(mdl.Price.Currency, model.DefaultCurrency)}, nil
}
