package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/workflow"
)

// WorkflowCompletions returns the workflow's completions with their usage, by number.
func (db *DB) WorkflowCompletions(ctx context.Context, workflowID string) ([]workflow.Completion, error) {
	rows, err := db.pool.Query(ctx, `SELECT workflow_id, n, data, step, tenant, agent, agent_version, model,
			provider_model, input_tokens, output_tokens, cost, currency, finish_reason, created_at
		FROM workflow_completions WHERE workflow_id = $1 ORDER BY n`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("query completions: %w", unavailable(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (workflow.Completion, error) {
		var (
			c  workflow.Completion
			at *time.Time
		)
		err := row.Scan(&c.WorkflowID, &c.N, &c.Data, &c.Step, &c.Tenant, &c.Agent, &c.AgentVersion, &c.Model,
			&c.ProviderModel, &c.InputTokens, &c.OutputTokens, &c.Cost, &c.Currency, &c.FinishReason, &at)
		c.Data = slices.Clone(c.Data)
		if at != nil {
			c.CreatedAt = at.UTC()
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("query completions: %w", err)
	}
	return out, nil
}

// WorkflowUsage sums the workflow's completions from their usage columns.
func (db *DB) WorkflowUsage(ctx context.Context, workflowID string) (workflow.CompletionTotals, error) {
	rows, err := db.pool.Query(ctx, `SELECT input_tokens, output_tokens, cost, currency
		FROM workflow_completions WHERE workflow_id = $1 ORDER BY n`, workflowID)
	if err != nil {
		return workflow.CompletionTotals{}, fmt.Errorf("query completion usage: %w", unavailable(err))
	}
	comps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (workflow.Completion, error) {
		var c workflow.Completion
		err := row.Scan(&c.InputTokens, &c.OutputTokens, &c.Cost, &c.Currency)
		return c, err
	})
	if err != nil {
		return workflow.CompletionTotals{}, fmt.Errorf("query completion usage: %w", err)
	}
	return workflow.TotalCompletions(comps), nil
}

// RecordUsage adds u to the tenant's usage of its day.
func (db *DB) RecordUsage(ctx context.Context, u workflow.UsageRecord) error {
	_, err := db.pool.Exec(ctx, `INSERT INTO llm_usage_daily (tenant, day, agent, model, currency,
			input_tokens, output_tokens, completions, cost) VALUES ($1, $2::date, $3, $4, $5, $6, $7, 1, $8)
		ON CONFLICT (tenant, day, model, agent, currency) DO UPDATE SET
			input_tokens = llm_usage_daily.input_tokens + excluded.input_tokens,
			output_tokens = llm_usage_daily.output_tokens + excluded.output_tokens,
			completions = llm_usage_daily.completions + 1, cost = llm_usage_daily.cost + excluded.cost`,
		u.Tenant, workflow.Day(u.At), u.Agent, u.Model, u.Currency, u.InputTokens, u.OutputTokens, u.Cost)
	if err != nil {
		return fmt.Errorf("add completion to usage: %w", unavailable(err))
	}
	return nil
}

// TokensToday returns the tenant's tokens through the model on day's date.
func (db *DB) TokensToday(ctx context.Context, tenant, model string, day time.Time) (int64, error) {
	var n int64
	err := db.pool.QueryRow(ctx, `SELECT COALESCE(SUM(input_tokens + output_tokens), 0)::bigint FROM llm_usage_daily
		WHERE tenant = $1 AND day = $2::date AND model = $3`, tenant, workflow.Day(day), model).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("query usage: %w", unavailable(err))
	}
	return n, nil
}

// usageKeys are the column expressions a usage report groups by.
var usageKeys = map[string]string{workflow.GroupByAgent: "agent", workflow.GroupByModel: "model",
	workflow.GroupByDay: "to_char(day, 'YYYY-MM-DD')"}

// Usage returns the tenant's usage in q's days, grouped by q.GroupBy.
func (db *DB) Usage(ctx context.Context, tenant string, q workflow.UsageQuery) ([]workflow.UsageGroup, error) {
	key, ok := usageKeys[q.GroupBy]
	if !ok {
		return nil, fmt.Errorf("usage: cannot group by %q", q.GroupBy)
	}
	rows, err := db.pool.Query(ctx, `SELECT `+key+`, currency, SUM(input_tokens)::bigint, SUM(output_tokens)::bigint,
			SUM(completions)::bigint, SUM(cost)
		FROM llm_usage_daily WHERE tenant = $1 AND day >= $2::date AND day <= $3::date
		GROUP BY 1, 2 ORDER BY 1, 2`, tenant, workflow.Day(q.Since), workflow.Day(q.Until))
	if err != nil {
		return nil, fmt.Errorf("query usage: %w", unavailable(err))
	}
	var (
		groups      []workflow.UsageGroup
		k, currency string
		in, out, n  int64
		cost        float64
	)
	_, err = pgx.ForEachRow(rows, []any{&k, &currency, &in, &out, &n, &cost}, func() error {
		groups = workflow.AddUsage(groups, k, currency, in, out, n, cost)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query usage: %w", err)
	}
	return groups, nil
}
