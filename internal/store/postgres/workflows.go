package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

var _ workflow.Store = (*DB)(nil)

// heldBy is a CTE naming the workflow $1 while owner $2 holds its lease. FOR
// KEY SHARE keeps a claim or a cancel by another replica (both lock the row
// FOR UPDATE) from passing the write until it commits (the claimer then
// sees what was written), while the owner's own lease renewals, plain
// updates of a non-key column, pass it: a renewal of many workflows and a
// batch of writes to several of them then never wait on each other in a
// cycle.
const heldBy = `WITH held AS (SELECT id FROM workflows
	WHERE id = $1 AND status = 'running' AND owner = $2 FOR KEY SHARE) `

// CreateWorkflow stores a new running workflow owned by w.Owner.
func (db *DB) CreateWorkflow(ctx context.Context, w *workflow.Workflow, rec *audit.Record) error {
	if w.Status == "" {
		w.Status = workflow.Running
	}
	row, err := workflowRow(w)
	if err != nil {
		return err
	}
	var key any // NULL: no key
	if w.IdempotencyKey != "" {
		key = w.IdempotencyKey
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tx.Queue(func(err error) error {
			if isUniqueOn(err, "workflows_idem_key") {
				return workflow.KeyTaken()
			}
			if isUnique(err) {
				return problem.New(problem.Conflict, "workflow %s already exists", w.ID)
			}
			if err != nil {
				return fmt.Errorf("insert workflow: %w", err)
			}
			return nil
		}, `INSERT INTO workflows (`+sqlrow.WorkflowColumns+`, idem_key, idem_hash) VALUES ($1, $2, $3, $4, $5, $6,
			$7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)`,
			append(row, key, w.RequestHash)...)
		claimScheduled(tx, w) // schedules.go
		tx.Audit(rec)
		return nil
	})
}

// AppendSteps stores steps in order, clearing their intents and appending
// their records, provided owner still holds the workflow's lease.
func (db *DB) AppendSteps(ctx context.Context, owner string, steps ...workflow.StepWrite) error {
	db.prepareSteps(steps)
	return db.write(ctx, func(tx *wtx) error {
		appendSteps(tx, owner, steps)
		return nil
	})
}

// prepareSteps readies steps for appendSteps: times at the database's
// precision, records chained in order.
func (db *DB) prepareSteps(steps []workflow.StepWrite) {
	for _, sw := range steps {
		sw.Step.StartedAt = micro(sw.Step.StartedAt)
		db.prepareAudit(sw.Records...)
		if sw.Completion != nil {
			sw.Completion.CreatedAt = micro(sw.Completion.CreatedAt)
		}
	}
}

func appendSteps(tx *wtx, owner string, steps []workflow.StepWrite) {
	for _, sw := range steps {
		appendStep(tx, owner, sw.Step, sw.Records)
		if c := sw.Completion; c != nil {
			tx.Queue(func(err error) error { return leaseRequired(err, c.WorkflowID, "record completion") },
				insertCompletion+`SELECT require_rows(count(*), 'lease') FROM held`, completionArgs(owner, c)...)
		}
	}
}

func appendStep(tx *wtx, owner string, s *workflow.Step, recs []*audit.Record) {
	var in, out *int64
	if s.Usage != nil {
		in, out = &s.InputTokens, &s.OutputTokens
	}
	tx.Queue(func(err error) error {
		if isUnique(err) {
			return fmt.Errorf("workflow %s already has step %d", s.WorkflowID, s.Seq)
		}
		return leaseRequired(err, s.WorkflowID, "store step")
	}, heldBy+`, ins AS (INSERT INTO workflow_steps (`+sqlrow.StepColumns+`)
		SELECT held.id, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
			$23, $24, $25, $26, $27, $28, $29, $30
		FROM held RETURNING 1)
		SELECT require_rows(count(*), 'lease') FROM ins`,
		s.WorkflowID, owner, s.Seq, s.Step, s.Action, s.Kind, s.Status, s.Tool, s.Operation,
		nullJSON(s.Args), s.Score, s.Queue, s.Outcome, nullJSON(s.Result), s.Error, nullJSON(s.Request),
		s.HTTPStatus, s.Attempts, s.StartedAt, s.DurationMS, s.Sent, s.Reason,
		s.Model, in, out, s.FinishReason, s.ErrorCode, s.Attempt, s.Journal, sqlrow.InjectedValue(s))
	if s.Tool != "" { // an intent is a call's: only a call's step ends it
		tx.Queue(wrapErr("store step"), `DELETE FROM workflow_intents WHERE workflow_id = $1 AND step = $2`, s.WorkflowID, s.Step)
	}
	tx.Audit(recs...)
	tx.notify(changeChanged, s.WorkflowID)
}

// RecordIntent stores an intent, provided owner holds the lease.
func (db *DB) RecordIntent(ctx context.Context, owner string, in workflow.Intent) error {
	tag, err := db.pool.Exec(ctx, heldBy+`INSERT INTO workflow_intents (workflow_id, step, tool, operation, call_digest, at)
		SELECT held.id, $3, $4, $5, $6, $7 FROM held
		ON CONFLICT (workflow_id, step) DO UPDATE SET tool = excluded.tool, operation = excluded.operation,
			call_digest = excluded.call_digest, at = excluded.at`,
		in.WorkflowID, owner, in.Step, in.Tool, in.Operation, in.Call, micro(in.At))
	if err != nil {
		return fmt.Errorf("record intent: %w", unavailable(err))
	}
	return leaseHeld(tag, in.WorkflowID, "record intent")
}

// insertCompletion stores a completion ($3 on) of workflow $1, provided
// owner $2 holds its lease, and adds it to the tenant's daily usage, once;
// a SELECT FROM held ends it.
const insertCompletion = heldBy + `, ins AS (INSERT INTO workflow_completions (workflow_id, n, data, step, tenant,
			agent, agent_version, model, provider_model, input_tokens, output_tokens, cost, currency, finish_reason, created_at)
		SELECT held.id, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 FROM held
		ON CONFLICT (workflow_id, n) DO NOTHING
		RETURNING tenant, agent, model, currency, input_tokens, output_tokens, cost),
	usage AS (INSERT INTO llm_usage_daily (tenant, day, agent, model, currency, input_tokens, output_tokens, completions, cost)
		SELECT tenant, $17::date, agent, model, currency, input_tokens, output_tokens, 1, cost FROM ins
		ON CONFLICT (tenant, day, model, agent, currency) DO UPDATE SET
			input_tokens = llm_usage_daily.input_tokens + excluded.input_tokens,
			output_tokens = llm_usage_daily.output_tokens + excluded.output_tokens,
			completions = llm_usage_daily.completions + 1, cost = llm_usage_daily.cost + excluded.cost)
	`

// completionArgs are insertCompletion's arguments.
func completionArgs(owner string, c *workflow.Completion) []any {
	return []any{c.WorkflowID, owner, c.N, string(c.Data), c.Step, c.Tenant, c.Agent, c.AgentVersion, c.Model, c.ProviderModel,
		c.InputTokens, c.OutputTokens, c.Cost, c.Currency, c.FinishReason, c.CreatedAt, workflow.Day(c.CreatedAt)}
}

// FinishWorkflow stores how w ended and drops its lease, provided owner
// holds it, after the last steps in the same transaction.
func (db *DB) FinishWorkflow(ctx context.Context, owner string, w *workflow.Workflow, recs []*audit.Record,
	last ...workflow.StepWrite) error {
	if w.Status == workflow.Running || w.Status == "" {
		return fmt.Errorf("finish workflow %s: status %q is not final", w.ID, w.Status)
	}
	if w.FinishedAt.IsZero() {
		w.FinishedAt = db.now()
	}
	w.FinishedAt = micro(w.FinishedAt)
	db.prepareSteps(last)
	db.prepareAudit(recs...) // after the steps', as they are chained after them
	err := db.write(ctx, func(tx *wtx) error {
		appendSteps(tx, owner, last)
		tx.Queue(func(err error) error { return leaseRequired(err, w.ID, "finish workflow") },
			`WITH up AS (UPDATE workflows SET status = $3, outcome = $4, output = $5, error = $6,
				finished_at = $7, owner = '', lease_until = $8
			WHERE id = $1 AND status = 'running' AND owner = $2 RETURNING 1)
			SELECT require_rows(count(*), 'lease') FROM up`,
			w.ID, owner, w.Status, w.Outcome, nullJSON(w.Output), nullJSON(w.Error), w.FinishedAt, time.Time{})
		tx.notify(changeChanged, w.ID)
		tx.Audit(recs...)
		queueWebhookEvent(tx, webhook.Finished(w)) // webhooks.go: the outbox
		return nil
	})
	if err != nil {
		return err
	}
	w.Owner, w.LeaseUntil = "", time.Time{}
	return nil
}

// leaseRequired turns the failure of a statement that requires the lease
// (require_rows) into workflow.ErrLeaseLost; other errors say what failed.
func leaseRequired(err error, id, what string) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "AP001" {
		return fmt.Errorf("%s: workflow %s is not running under this owner: %w", what, id, workflow.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// leaseHeld turns the tag of a lease-checked statement into
// workflow.ErrLeaseLost when it changed nothing.
func leaseHeld(tag pgconn.CommandTag, id, what string) error {
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: workflow %s is not running under this owner: %w", what, id, workflow.ErrLeaseLost)
	}
	return nil
}

// Workflow returns a workflow of the tenant, or problem.NotFound.
func (db *DB) Workflow(ctx context.Context, tenant, id string) (*workflow.Workflow, error) {
	w, err := sqlrow.ScanWorkflow(db.pool.QueryRow(ctx, `SELECT `+sqlrow.WorkflowColumns+` FROM workflows
		WHERE tenant = $1 AND id = $2`, tenant, id))
	switch {
	case sqlrow.IsNoRows(err):
		return nil, workflowNotFound(id)
	case err != nil && unreachable(err):
		return nil, problem.Wrap(problem.Unavailable, err, "the database is unreachable")
	}
	return w, err
}

// WorkflowByKey returns the workflow of the tenant created with the
// idempotency key key.
func (db *DB) WorkflowByKey(ctx context.Context, tenant, key string) (*workflow.Workflow, error) {
	row := db.pool.QueryRow(ctx, `SELECT `+sqlrow.WorkflowColumns+`, idem_key, idem_hash FROM workflows
		WHERE tenant = $1 AND idem_key = $2`, tenant, key)
	var k, hash string
	w, err := sqlrow.ScanWorkflow(sqlrow.With(row, &k, &hash))
	switch {
	case sqlrow.IsNoRows(err):
		return nil, problem.New(problem.NotFound, "no workflow was created with this idempotency key")
	case err != nil && unreachable(err):
		return nil, problem.Wrap(problem.Unavailable, err, "the database is unreachable")
	case err != nil:
		return nil, err
	}
	w.IdempotencyKey, w.RequestHash = k, hash
	return w, nil
}

// ExpireKey takes key off the tenant's workflow that has it if it
// started before before.
func (db *DB) ExpireKey(ctx context.Context, tenant, key string, before time.Time) error {
	_, err := db.pool.Exec(ctx, `UPDATE workflows SET idem_key = NULL
		WHERE tenant = $1 AND idem_key = $2 AND started_at < $3`, tenant, key, before)
	if err != nil && unreachable(err) {
		return problem.Wrap(problem.Unavailable, err, "the database is unreachable")
	}
	return err
}

// Steps returns the workflow's steps after afterSeq, in order.
func (db *DB) Steps(ctx context.Context, workflowID string, afterSeq int) ([]workflow.Step, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+sqlrow.StepColumns+` FROM workflow_steps
		WHERE workflow_id = $1 AND seq > $2 ORDER BY seq`, workflowID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("query steps: %w", unavailable(err))
	}
	steps, err := collect(rows, sqlrow.ScanStep)
	if err != nil {
		return nil, fmt.Errorf("query steps: %w", err)
	}
	return steps, nil
}

// Intents returns the workflow's uncleared intents by step.
func (db *DB) Intents(ctx context.Context, workflowID string) ([]workflow.Intent, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+sqlrow.IntentColumns+` FROM workflow_intents
		WHERE workflow_id = $1 ORDER BY step`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("query intents: %w", unavailable(err))
	}
	ins, err := collect(rows, sqlrow.ScanIntent)
	if err != nil {
		return nil, fmt.Errorf("query intents: %w", err)
	}
	return ins, nil
}

// Completions returns the workflow's recorded completions by number.
func (db *DB) Completions(ctx context.Context, workflowID string) (map[int]json.RawMessage, error) {
	rows, err := db.pool.Query(ctx, `SELECT n, data FROM workflow_completions WHERE workflow_id = $1`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("query completions: %w", unavailable(err))
	}
	out := map[int]json.RawMessage{}
	var (
		n    int
		data []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&n, &data}, func() error {
		out[n] = json.RawMessage(slices.Clone(data))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query completions: %w", err)
	}
	return out, nil
}

// ListWorkflows returns the tenant's workflows matching f, newest first.
func (db *DB) ListWorkflows(ctx context.Context, tenant string, f workflow.ListFilter) ([]*workflow.Workflow, error) {
	var wfs []*workflow.Workflow
	err := db.listTx(ctx, tenant, f, func(tx pgx.Tx, query string, args []any) error {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("list workflows: %w", unavailable(err))
		}
		wfs, err = collectWorkflows(rows)
		return err
	})
	return wfs, err
}

// sampleRows is how many of the newest workflows (from the cursor) a list
// with goal words looks at first: when a page of them hold the words, the
// list walks newest first, checking each goal, and fills its page within
// about that many rows; otherwise it fetches the matches through the
// trigram index and sorts them. The planner, left alone, walks even for
// rare words (it prices ILIKE far below what it costs on a goal), and
// counting matches through the index is slow for common words, whose
// trigrams match most rows.
const sampleRows = 1000

// listTx runs fn with ListWorkflows' query and its arguments in a read-only
// transaction, planned for its words (see sampleRows): when the goal words
// are rare among the newest workflows, index scans (walks) are turned off
// for the transaction, so the planner fetches the matches through the
// trigram index and sorts them.
func (db *DB) listTx(ctx context.Context, tenant string, f workflow.ListFilter, fn func(tx pgx.Tx, query string, args []any) error) error {
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("list workflows: %w", unavailable(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if len(f.Words) > 0 {
		// A generic plan (the statement cache's, after a few runs) knows
		// nothing of the pattern; each list is planned for its words.
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_custom_plan`); err != nil {
			return fmt.Errorf("list workflows: %w", unavailable(err))
		}
		query, args := goalSampleQuery(tenant, f)
		var n int
		if err := tx.QueryRow(ctx, query, args...).Scan(&n); err != nil {
			return fmt.Errorf("sample goal matches: %w", unavailable(err))
		}
		if n < page.Size(f.Limit) {
			if _, err := tx.Exec(ctx, `SET LOCAL enable_indexscan = off`); err != nil {
				return fmt.Errorf("list workflows: %w", unavailable(err))
			}
		}
	}
	query, args := listWorkflowsQuery(tenant, f)
	if err := fn(tx, query, args); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// goalSampleQuery counts the workflows among the tenant's sampleRows newest
// (before f's cursor) whose goal holds every word.
func goalSampleQuery(tenant string, f workflow.ListFilter) (string, []any) {
	where := []string{"tenant = $1"}
	args := []any{tenant}
	if f.Before != "" {
		args = append(args, f.Before)
		where = append(where, fmt.Sprintf("id < $%d", len(args)))
	}
	var match []string
	for _, w := range f.Words {
		args = append(args, "%"+likeEscape(w)+"%")
		match = append(match, fmt.Sprintf(`goal ILIKE $%d ESCAPE '\'`, len(args)))
	}
	return fmt.Sprintf(`SELECT count(*) FROM (SELECT goal FROM workflows WHERE %s ORDER BY id DESC LIMIT %d) m WHERE %s`,
		strings.Join(where, " AND "), sampleRows, strings.Join(match, " AND ")), args
}

// CountWorkflows counts the tenant's workflows matching f, its Limit and
// Before aside.
func (db *DB) CountWorkflows(ctx context.Context, tenant string, f workflow.ListFilter) (int, error) {
	where, args := workflowsWhere(tenant, f)
	var n int
	err := db.read(ctx, func(q querier) error {
		if err := q.QueryRow(ctx, `SELECT count(*) FROM workflows WHERE `+strings.Join(where, " AND "), args...).Scan(&n); err != nil {
			return fmt.Errorf("count workflows: %w", err)
		}
		return nil
	})
	return n, err
}

// listWorkflowsQuery is ListWorkflows' query and its arguments.
func listWorkflowsQuery(tenant string, f workflow.ListFilter) (string, []any) {
	where, args := workflowsWhere(tenant, f)
	if f.Before != "" {
		args = append(args, f.Before)
		where = append(where, fmt.Sprintf("id < $%d", len(args)))
	}
	args = append(args, page.Size(f.Limit))
	return `SELECT ` + sqlrow.WorkflowColumns + ` FROM workflows
		WHERE ` + strings.Join(where, " AND ") + fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args)), args
}

// workflowsWhere is the conditions, with their arguments, of the tenant's
// workflows matching f, whatever its Limit and Before.
func workflowsWhere(tenant string, f workflow.ListFilter) (where []string, args []any) {
	where = []string{"tenant = $1"}
	args = []any{tenant}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Agent != "" {
		add("agent = $%d", f.Agent)
	}
	if f.Status != "" {
		add("status = $%d", f.Status)
	}
	if f.Outcome != "" {
		add("outcome = $%d", f.Outcome)
	}
	if !f.Since.IsZero() {
		add("started_at >= $%d", microCeil(f.Since))
	}
	if !f.Until.IsZero() {
		add("started_at <= $%d", f.Until)
	}
	if f.Version != "" {
		add("agent_version = $%d", f.Version)
	}
	for _, w := range f.Words {
		add(`goal ILIKE $%d ESCAPE '\'`, "%"+likeEscape(w)+"%")
	}
	for _, k := range sortedKeys(f.Context) {
		args = append(args, k, f.Context[k])
		where = append(where, fmt.Sprintf("context->>$%d = $%d", len(args)-1, len(args)))
	}
	return where, args
}

func workflowNotFound(id string) error {
	return problem.New(problem.NotFound, "no workflow with id %q", id)
}

// micro is t in UTC at the microsecond precision PostgreSQL keeps (it would
// round, not truncate, finer times).
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// microCeil is t rounded up to the microsecond, for bounds: a stored
// (microsecond) time is before t exactly when it is before microCeil(t).
func microCeil(t time.Time) time.Time {
	if u := micro(t); u.Before(t) {
		return u.Add(time.Microsecond)
	}
	return micro(t)
}

// nullJSON is b as a nullable json parameter: NULL when empty.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// workflowRow is w's values in sqlrow.WorkflowColumns order; w's times are brought
// to the precision they are stored at.
func workflowRow(w *workflow.Workflow) ([]any, error) {
	caller, err := json.Marshal(w.Caller)
	if err != nil {
		return nil, fmt.Errorf("encode workflow caller: %w", err)
	}
	revs, err := json.Marshal(w.ToolRevisions)
	if err != nil {
		return nil, fmt.Errorf("encode workflow tool revisions: %w", err)
	}
	w.StartedAt, w.FinishedAt, w.Deadline, w.LeaseUntil = micro(w.StartedAt), micro(w.FinishedAt), micro(w.Deadline), micro(w.LeaseUntil)
	var finished *time.Time
	if !w.FinishedAt.IsZero() {
		finished = &w.FinishedAt
	}
	faults, err := sqlrow.FaultsValue(w)
	if err != nil {
		return nil, err
	}
	return []any{w.ID, w.Tenant, w.Agent, w.AgentVersion, w.Status, w.Outcome, w.Goal, nullJSON(w.Context),
		string(caller), w.MaxToolCalls, nullJSON(w.Output), nullJSON(w.Error), w.ReplayOf, w.RequestID, w.TraceID,
		w.StartedAt, finished, w.Deadline, w.CancelRequested, w.Owner, w.LeaseUntil, string(revs), w.MaxLLMTokens, faults, w.OnExhausted, sqlrow.RolloutValue(w)}, nil
}

func collectWorkflows(rows pgx.Rows) ([]*workflow.Workflow, error) {
	wfs, err := collect(rows, sqlrow.ScanWorkflow)
	if err != nil {
		return nil, fmt.Errorf("read workflows: %w", err)
	}
	return wfs, nil
}

// ListWorkflowsPlan is PostgreSQL's plan for ListWorkflows(tenant, f), the
// lines of EXPLAIN: for tests and the console benchmark, which check that
// each filter the console offers walks an index.
func (db *DB) ListWorkflowsPlan(ctx context.Context, tenant string, f workflow.ListFilter) ([]string, error) {
	var plan []string
	err := db.listTx(ctx, tenant, f, func(tx pgx.Tx, query string, args []any) error {
		rows, err := tx.Query(ctx, `EXPLAIN `+query, args...)
		if err != nil {
			return fmt.Errorf("explain list workflows: %w", unavailable(err))
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return plan, err
}
