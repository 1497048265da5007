package workflow

import (
	"context"
	"encoding/json"
	"math"
	"time"
)

// Completion is one recorded LLM completion of a workflow: the numbers the
// tenant's usage and budgets are counted from, and Data, the
// agent.RecordedCompletion (the whole request, its hash, the whole response).
type Completion struct {
	WorkflowID   string
	N            int
	Step         int
	Tenant       string
	Agent        string
	AgentVersion string
	// Model is the registered model's name; ProviderModel the provider's
	// id of the model that answered.
	Model         string
	ProviderModel string
	InputTokens   int64
	OutputTokens  int64
	// Cost is in Currency, from the model's price; Currency is empty when
	// the model has no price.
	Cost         float64
	Currency     string
	FinishReason string
	CreatedAt    time.Time
	Data         json.RawMessage
}

// UsageRecord is one completion's tokens and cost, counted toward the
// tenant's usage of At's UTC day under Agent and Model.
type UsageRecord struct {
	Tenant, Agent, Model string
	InputTokens          int64
	OutputTokens         int64
	// Cost is in Currency; Currency is empty when the model has no price.
	Cost     float64
	Currency string
	At       time.Time
}

// Groupings of a usage report.
const (
	GroupByAgent = "agent"
	GroupByModel = "model"
	GroupByDay   = "day"
)

// UsageQuery selects a tenant's usage over whole UTC days: those from
// Since's day to Until's day, both included.
type UsageQuery struct {
	Since, Until time.Time
	GroupBy      string
}

// Cost is an amount of one currency.
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// MarshalJSON writes the amount rounded to a billionth: sums of prices
// per token carry floating-point noise below that.
func (c Cost) MarshalJSON() ([]byte, error) {
	type plain Cost
	c.Amount = math.Round(c.Amount*1e9) / 1e9
	return json.Marshal(plain(c))
}

// UsageGroup is the usage of one agent, model or day (Key); Cost has one
// amount per currency the models' prices are in.
type UsageGroup struct {
	Key          string
	InputTokens  int64
	OutputTokens int64
	Completions  int64
	Cost         []Cost
}

// UsageStore keeps every tenant's daily usage per agent and model, added to
// as completions are recorded, shared by the replicas.
type UsageStore interface {
	// RecordUsage adds a completion made outside any workflow's history (a
	// live what-if replay's) to the tenant's usage of its day.
	RecordUsage(ctx context.Context, u UsageRecord) error
	// TokensToday returns the tenant's tokens (input + output) through the
	// model on day's UTC date.
	TokensToday(ctx context.Context, tenant, model string, day time.Time) (int64, error)
	// Usage returns the tenant's usage in q's days, grouped by q.GroupBy,
	// ordered by key.
	Usage(ctx context.Context, tenant string, q UsageQuery) ([]UsageGroup, error)
}

// Day is t's UTC date as usage is kept by: "2006-01-02".
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// AddUsage folds a (key, currency) row of usage into groups, in order: rows
// of the same key (consecutive, as ordered by key) make one group.
func AddUsage(groups []UsageGroup, key, currency string, in, out, n int64, cost float64) []UsageGroup {
	if len(groups) == 0 || groups[len(groups)-1].Key != key {
		groups = append(groups, UsageGroup{Key: key})
	}
	g := &groups[len(groups)-1]
	g.InputTokens += in
	g.OutputTokens += out
	g.Completions += n
	if currency != "" {
		g.Cost = append(g.Cost, Cost{Amount: cost, Currency: currency})
	}
	return groups
}

// CompletionTotals are a workflow's completions summed: their tokens, how
// many there were, and their cost when every priced one is in one
// currency (nil otherwise).
type CompletionTotals struct {
	InputTokens, OutputTokens int64
	Completions               int
	Cost                      *Cost
}

// TotalCompletions sums a workflow's completions.
func TotalCompletions(comps []Completion) CompletionTotals {
	t := CompletionTotals{Completions: len(comps)}
	currencies := map[string]float64{}
	for _, c := range comps {
		t.InputTokens += c.InputTokens
		t.OutputTokens += c.OutputTokens
		if c.Currency != "" {
			currencies[c.Currency] += c.Cost
		}
	}
	if len(currencies) == 1 {
		for cur, amount := range currencies {
			t.Cost = &Cost{Amount: amount, Currency: cur}
		}
	}
	return t
}
