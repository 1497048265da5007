package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/workflow"
)

// WorkflowCompletions returns the workflow's completions with their usage, by number.
func (db *DB) WorkflowCompletions(ctx context.Context, workflowID string) ([]workflow.Completion, error) {
	var out []workflow.Completion
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT workflow_id, n, data, step, tenant, agent, agent_version, model,
				provider_model, input_tokens, output_tokens, cost, currency, finish_reason, created_at
			FROM workflow_completions WHERE workflow_id = ? ORDER BY n`, workflowID)
		if err != nil {
			return fmt.Errorf("query completions: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				c        workflow.Completion
				data, at string
			)
			if err := rows.Scan(&c.WorkflowID, &c.N, &data, &c.Step, &c.Tenant, &c.Agent, &c.AgentVersion, &c.Model,
				&c.ProviderModel, &c.InputTokens, &c.OutputTokens, &c.Cost, &c.Currency, &c.FinishReason, &at); err != nil {
				return fmt.Errorf("scan completion: %w", err)
			}
			c.Data = []byte(data)
			if at != "" {
				if c.CreatedAt, err = parseTime(at); err != nil {
					return err
				}
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

// WorkflowUsage sums the workflow's completions from their usage columns.
func (db *DB) WorkflowUsage(ctx context.Context, workflowID string) (workflow.CompletionTotals, error) {
	var comps []workflow.Completion
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT input_tokens, output_tokens, cost, currency
			FROM workflow_completions WHERE workflow_id = ? ORDER BY n`, workflowID)
		if err != nil {
			return fmt.Errorf("query completion usage: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var c workflow.Completion
			if err := rows.Scan(&c.InputTokens, &c.OutputTokens, &c.Cost, &c.Currency); err != nil {
				return fmt.Errorf("scan completion usage: %w", err)
			}
			comps = append(comps, c)
		}
		return rows.Err()
	})
	return workflow.TotalCompletions(comps), err
}

// RecordUsage adds u to the tenant's usage of its day.
func (db *DB) RecordUsage(ctx context.Context, u workflow.UsageRecord) error {
	return db.write(ctx, func(tx dbtx) error { return addUsage(ctx, tx, u) })
}

// addUsage adds one completion to the daily usage table.
func addUsage(ctx context.Context, tx dbtx, u workflow.UsageRecord) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO llm_usage_daily (tenant, day, agent, model, currency,
			input_tokens, output_tokens, completions, cost) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)
		ON CONFLICT (tenant, day, model, agent, currency) DO UPDATE SET
			input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
			completions = completions + 1, cost = cost + excluded.cost`,
		u.Tenant, workflow.Day(u.At), u.Agent, u.Model, u.Currency, u.InputTokens, u.OutputTokens, u.Cost)
	if err != nil {
		return fmt.Errorf("add completion to usage: %w", err)
	}
	return nil
}

// TokensToday returns the tenant's tokens through the model on day's date.
func (db *DB) TokensToday(ctx context.Context, tenant, model string, day time.Time) (int64, error) {
	var n int64
	err := db.query(ctx, func(tx dbtx) error {
		err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM llm_usage_daily
			WHERE tenant = ? AND day = ? AND model = ?`, tenant, workflow.Day(day), model).Scan(&n)
		if err != nil {
			return fmt.Errorf("query usage: %w", err)
		}
		return nil
	})
	return n, err
}

// usageKeys are the columns a usage report groups by.
var usageKeys = map[string]string{workflow.GroupByAgent: "agent", workflow.GroupByModel: "model", workflow.GroupByDay: "day"}

// Usage returns the tenant's usage in q's days, grouped by q.GroupBy.
func (db *DB) Usage(ctx context.Context, tenant string, q workflow.UsageQuery) ([]workflow.UsageGroup, error) {
	key, ok := usageKeys[q.GroupBy]
	if !ok {
		return nil, fmt.Errorf("usage: cannot group by %q", q.GroupBy)
	}
	var groups []workflow.UsageGroup
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+key+`, currency, SUM(input_tokens), SUM(output_tokens),
				SUM(completions), SUM(cost)
			FROM llm_usage_daily WHERE tenant = ? AND day >= ? AND day <= ?
			GROUP BY `+key+`, currency ORDER BY `+key+`, currency`, tenant, workflow.Day(q.Since), workflow.Day(q.Until))
		if err != nil {
			return fmt.Errorf("query usage: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				k, currency string
				in, out, n  int64
				cost        float64
			)
			if err := rows.Scan(&k, &currency, &in, &out, &n, &cost); err != nil {
				return fmt.Errorf("scan usage: %w", err)
			}
			groups = workflow.AddUsage(groups, k, currency, in, out, n, cost)
		}
		return rows.Err()
	})
	return groups, err
}
