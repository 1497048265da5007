package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

var _ workflow.Store = (*DB)(nil)

// noLease is lease_until of a workflow nobody holds: before any real time.
var noLease = sqlrow.FormatTime(time.Time{})

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
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO workflows (`+sqlrow.WorkflowColumns+`, idem_key, idem_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(row, key, w.RequestHash)...)
		if isUnique(err) && key != nil && strings.Contains(err.Error(), "idem_key") {
			return workflow.KeyTaken()
		}
		if isUnique(err) {
			return problem.New(problem.Conflict, "workflow %s already exists", w.ID)
		}
		if err != nil {
			return fmt.Errorf("insert workflow: %w", err)
		}
		if err := tx.goals.add(res); err != nil { // indexed with the batch: goals.go
			return err
		}
		if err := claimScheduled(ctx, tx, w); err != nil { // schedules.go
			return err
		}
		return appendAudit(ctx, tx, rec)
	})
}

// AppendSteps stores steps in order, clearing their intents and appending
// their records, provided owner still holds the workflow's lease.
func (db *DB) AppendSteps(ctx context.Context, owner string, steps ...workflow.StepWrite) error {
	rows := db.prepareSteps(owner, steps)
	return db.write(ctx, func(tx dbtx) error {
		return appendSteps(ctx, tx, steps, rows)
	})
}

// prepareSteps readies steps for appendSteps: their rows, and their
// records chained in order.
func (db *DB) prepareSteps(owner string, steps []workflow.StepWrite) [][]any {
	rows := make([][]any, len(steps))
	for i, sw := range steps {
		rows[i] = stepRow(owner, sw.Step)
		db.prepareAudit(sw.Records...)
		if sw.Completion != nil {
			sw.Completion.CreatedAt = micro(sw.Completion.CreatedAt)
		}
	}
	return rows
}

func appendSteps(ctx context.Context, tx dbtx, steps []workflow.StepWrite, rows [][]any) error {
	for i, sw := range steps {
		if err := appendStep(ctx, tx, sw.Step, rows[i], sw.Records); err != nil {
			return err
		}
		if sw.Completion != nil {
			if err := insertCompletion(ctx, tx, sw.Completion); err != nil {
				return err
			}
		}
	}
	return nil
}

// stepRow is s's values for appendStep, ending with the lease check's.
func stepRow(owner string, s *workflow.Step) []any {
	s.StartedAt = micro(s.StartedAt)
	var in, out any
	if s.Usage != nil {
		in, out = s.InputTokens, s.OutputTokens
	}
	return []any{s.WorkflowID, s.Seq, s.Step, s.Action, s.Kind, s.Status, s.Tool, s.Operation,
		nullJSON(s.Args), s.Score, s.Queue, s.Outcome, nullJSON(s.Result), s.Error, nullJSON(s.Request),
		s.HTTPStatus, s.Attempts, sqlrow.FormatTime(s.StartedAt), s.DurationMS, s.Sent, s.Reason,
		s.Model, in, out, s.FinishReason, s.ErrorCode, s.Attempt, s.Journal, sqlrow.InjectedValue(s),
		s.WorkflowID, owner}
}

func appendStep(ctx context.Context, tx dbtx, s *workflow.Step, row []any, recs []*audit.Record) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO workflow_steps (`+sqlrow.StepColumns+`)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE EXISTS (SELECT 1 FROM workflows WHERE id = ? AND status = 'running' AND owner = ?)`, row...)
	if isUnique(err) {
		return fmt.Errorf("workflow %s already has step %d", s.WorkflowID, s.Seq)
	}
	if err := leaseHeld(res, err, s.WorkflowID, "store step"); err != nil {
		return err
	}
	if s.Tool == "" { // an intent is a call's: only a call's step ends it
		return appendAudit(ctx, tx, recs...)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM workflow_intents WHERE workflow_id = ? AND step = ?`,
		s.WorkflowID, s.Step); err != nil {
		return fmt.Errorf("clear intent: %w", err)
	}
	return appendAudit(ctx, tx, recs...)
}

// RecordIntent stores an intent, provided owner holds the lease.
func (db *DB) RecordIntent(ctx context.Context, owner string, in workflow.Intent) error {
	at := sqlrow.FormatTime(in.At)
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO workflow_intents (workflow_id, step, tool, operation, call_digest, at)
			SELECT ?, ?, ?, ?, ?, ?
			WHERE EXISTS (SELECT 1 FROM workflows WHERE id = ? AND status = 'running' AND owner = ?)
			ON CONFLICT (workflow_id, step) DO UPDATE SET tool = excluded.tool, operation = excluded.operation,
				call_digest = excluded.call_digest, at = excluded.at`,
			in.WorkflowID, in.Step, in.Tool, in.Operation, in.Call, at, in.WorkflowID, owner)
		return leaseHeld(res, err, in.WorkflowID, "record intent")
	})
}

// insertCompletion stores a completion of a workflow whose lease was
// checked, and adds it to the tenant's daily usage, once.
func insertCompletion(ctx context.Context, tx dbtx, c *workflow.Completion) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO workflow_completions (workflow_id, n, data, step, tenant, agent,
				agent_version, model, provider_model, input_tokens, output_tokens, cost, currency, finish_reason, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workflow_id, n) DO NOTHING`,
		c.WorkflowID, c.N, string(c.Data), c.Step, c.Tenant, c.Agent, c.AgentVersion, c.Model, c.ProviderModel,
		c.InputTokens, c.OutputTokens, c.Cost, c.Currency, c.FinishReason, sqlrow.FormatTime(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("record completion: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err // recorded before: counted then
	}
	return addUsage(ctx, tx, workflow.UsageRecord{Tenant: c.Tenant, Agent: c.Agent, Model: c.Model,
		InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, Cost: c.Cost, Currency: c.Currency, At: c.CreatedAt})
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
	lastRows := db.prepareSteps(owner, last)
	db.prepareAudit(recs...) // after the steps', as they are chained after them
	err := db.write(ctx, func(tx dbtx) error {
		if err := appendSteps(ctx, tx, last, lastRows); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE workflows SET status = ?, outcome = ?, output = ?, error = ?,
				finished_at = ?, owner = '', lease_until = ?
			WHERE id = ? AND status = 'running' AND owner = ?`,
			w.Status, w.Outcome, nullJSON(w.Output), nullJSON(w.Error), sqlrow.FormatTime(w.FinishedAt), noLease, w.ID, owner)
		if err := leaseHeld(res, err, w.ID, "finish workflow"); err != nil {
			return err
		}
		if err := queueWebhookEvent(ctx, tx, webhook.Finished(w)); err != nil { // webhooks.go: the outbox
			return err
		}
		return appendAudit(ctx, tx, recs...)
	})
	if err != nil {
		return err
	}
	w.Owner, w.LeaseUntil = "", time.Time{}
	return nil
}

// leaseHeld turns the result of a lease-checked statement into
// workflow.ErrLeaseLost when it changed nothing.
func leaseHeld(res sql.Result, err error, id, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: workflow %s is not running under this owner: %w", what, id, workflow.ErrLeaseLost)
	}
	return nil
}

// Workflow returns a workflow of the tenant, or problem.NotFound.
func (db *DB) Workflow(ctx context.Context, tenant, id string) (*workflow.Workflow, error) {
	var w *workflow.Workflow
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		w, err = sqlrow.ScanWorkflow(tx.QueryRowContext(ctx, `SELECT `+sqlrow.WorkflowColumns+` FROM workflows
			WHERE tenant = ? AND id = ?`, tenant, id))
		if sqlrow.IsNoRows(err) {
			return workflowNotFound(id)
		}
		return err
	})
	return w, err
}

// WorkflowByKey returns the workflow of the tenant created with the
// idempotency key key.
func (db *DB) WorkflowByKey(ctx context.Context, tenant, key string) (*workflow.Workflow, error) {
	var w *workflow.Workflow
	err := db.query(ctx, func(tx dbtx) error {
		row := tx.QueryRowContext(ctx, `SELECT `+sqlrow.WorkflowColumns+`, idem_key, idem_hash FROM workflows
			WHERE tenant = ? AND idem_key = ?`, tenant, key)
		var err error
		var k, hash string
		w, err = sqlrow.ScanWorkflow(sqlrow.With(row, &k, &hash))
		if sqlrow.IsNoRows(err) {
			return problem.New(problem.NotFound, "no workflow was created with this idempotency key")
		}
		if err == nil {
			w.IdempotencyKey, w.RequestHash = k, hash
		}
		return err
	})
	return w, err
}

// ExpireKey takes key off the tenant's workflow that has it if it
// started before before.
func (db *DB) ExpireKey(ctx context.Context, tenant, key string, before time.Time) error {
	return db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `UPDATE workflows SET idem_key = NULL
			WHERE tenant = ? AND idem_key = ? AND started_at < ?`, tenant, key, sqlrow.FormatTime(before))
		return err
	})
}

// Steps returns the workflow's steps after afterSeq, in order.
func (db *DB) Steps(ctx context.Context, workflowID string, afterSeq int) ([]workflow.Step, error) {
	var steps []workflow.Step
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.StepColumns+` FROM workflow_steps
			WHERE workflow_id = ? AND seq > ? ORDER BY seq`, workflowID, afterSeq)
		if err != nil {
			return fmt.Errorf("query steps: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			s, err := sqlrow.ScanStep(rows)
			if err != nil {
				return err
			}
			steps = append(steps, s)
		}
		return rows.Err()
	})
	return steps, err
}

// Intents returns the workflow's uncleared intents by step.
func (db *DB) Intents(ctx context.Context, workflowID string) ([]workflow.Intent, error) {
	var ins []workflow.Intent
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.IntentColumns+` FROM workflow_intents
			WHERE workflow_id = ? ORDER BY step`, workflowID)
		if err != nil {
			return fmt.Errorf("query intents: %w", err)
		}
		ins, err = collect(rows, sqlrow.ScanIntent)
		return err
	})
	return ins, err
}

// Completions returns the workflow's recorded completions by number.
func (db *DB) Completions(ctx context.Context, workflowID string) (map[int]json.RawMessage, error) {
	out := map[int]json.RawMessage{}
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT n, data FROM workflow_completions WHERE workflow_id = ?`, workflowID)
		if err != nil {
			return fmt.Errorf("query completions: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var n int
			var data string
			if err := rows.Scan(&n, &data); err != nil {
				return fmt.Errorf("scan completion: %w", err)
			}
			out[n] = json.RawMessage(data)
		}
		return rows.Err()
	})
	return out, err
}

// ListWorkflows returns the tenant's workflows matching f, newest first.
func (db *DB) ListWorkflows(ctx context.Context, tenant string, f workflow.ListFilter) ([]*workflow.Workflow, error) {
	var wfs []*workflow.Workflow
	err := db.query(ctx, func(tx dbtx) error {
		query, args, err := listWorkflowsQuery(ctx, tx, tenant, f)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("list workflows: %w", err)
		}
		wfs, err = collectWorkflows(rows)
		return err
	})
	return wfs, err
}

// denseMatches is how many of a tenant's workflows must hold the goal words
// for a list to walk the workflows newest first, checking each goal, rather
// than start from the goal index's matches and sort them: a page of a word
// that common fills after a few hundred goals, and sorting fewer matches
// than this is cheap.
const denseMatches = 500

// CountWorkflows counts the tenant's workflows matching f, its Limit and
// Before aside.
func (db *DB) CountWorkflows(ctx context.Context, tenant string, f workflow.ListFilter) (int, error) {
	var n int
	err := db.query(ctx, func(tx dbtx) error {
		from, where, args, err := workflowsWhere(ctx, tx, tenant, f)
		if err != nil {
			return err
		}
		err = tx.QueryRowContext(ctx, `SELECT count(*) FROM `+from+` WHERE `+strings.Join(where, " AND "), args...).Scan(&n)
		if err != nil {
			return fmt.Errorf("count workflows: %w", err)
		}
		return nil
	})
	return n, err
}

// listWorkflowsQuery is ListWorkflows' query and its arguments.
func listWorkflowsQuery(ctx context.Context, tx dbtx, tenant string, f workflow.ListFilter) (string, []any, error) {
	from, where, args, err := workflowsWhere(ctx, tx, tenant, f)
	if err != nil {
		return "", nil, err
	}
	if f.Before != "" {
		where = append(where, "id < ?")
		args = append(args, f.Before)
	}
	return `SELECT ` + sqlrow.WorkflowColumns + ` FROM ` + from + `
		WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT ?`, append(args, page.Size(f.Limit)), nil
}

// workflowsWhere is the table and the conditions, with their arguments, of
// the tenant's workflows matching f, whatever its Limit and Before. Goal
// words of three characters or more are looked up in the goal index
// first, to choose between the two plans (denseMatches).
func workflowsWhere(ctx context.Context, tx dbtx, tenant string, f workflow.ListFilter) (from string, where []string, args []any, err error) {
	from = "workflows"
	where = []string{"tenant = ?"}
	args = []any{tenant}
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if f.Agent != "" {
		add("agent = ?", f.Agent)
	}
	if f.Status != "" {
		add("status = ?", f.Status)
	}
	if f.Outcome != "" {
		add("outcome = ?", f.Outcome)
	}
	if !f.Since.IsZero() {
		add("started_at >= ?", fmtTimeCeil(f.Since))
	}
	if !f.Until.IsZero() {
		add("started_at <= ?", sqlrow.FormatTime(f.Until))
	}
	if f.Version != "" {
		add("agent_version = ?", f.Version)
	}
	words := f.Words
	if q := goalQuery(f.Words); q != "" {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM workflow_goals
			JOIN workflows ON workflows.rowid = workflow_goals.rowid
			WHERE workflow_goals MATCH ? AND workflows.tenant = ? LIMIT ?)`, q, tenant, denseMatches).Scan(&n)
		if err != nil {
			return "", nil, nil, fmt.Errorf("count goal matches: %w", err)
		}
		if n < denseMatches {
			// Few matches: fetch them by rowid (NOT INDEXED keeps the
			// planner from walking an index instead) and sort them.
			from = "workflows NOT INDEXED"
			add("rowid IN (SELECT rowid FROM workflow_goals WHERE workflow_goals MATCH ?)", q)
			words = slices.DeleteFunc(slices.Clone(words), func(w string) bool { return utf8.RuneCountInString(w) >= trigram })
		}
	}
	for _, w := range words {
		add(`goal LIKE ? ESCAPE '\'`, "%"+likeEscape(w)+"%") // LIKE is case-insensitive for ASCII
	}
	for _, k := range sortedKeys(f.Context) {
		path := `$."` + strings.ReplaceAll(k, `"`, `\"`) + `"`
		where = append(where, `(CASE json_type(context, ?) WHEN 'text' THEN json_extract(context, ?)
			WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE json_extract(context, ?) || '' END) = ?`)
		args = append(args, path, path, path, f.Context[k])
	}
	return from, where, args, nil
}

// trigram is the length of the shortest word the goal index can find.
const trigram = 3

// goalQuery is an FTS5 query on workflow_goals (a trigram index) matching
// the goals holding every word of at least three characters as a substring,
// in any case; "" when no word is that long.
func goalQuery(words []string) string {
	var phrases []string
	for _, w := range words {
		if utf8.RuneCountInString(w) >= trigram {
			phrases = append(phrases, `"`+strings.ReplaceAll(w, `"`, `""`)+`"`)
		}
	}
	return strings.Join(phrases, " AND ")
}

func workflowNotFound(id string) error {
	return problem.New(problem.NotFound, "no workflow with id %q", id)
}

// micro is t in UTC at the microsecond precision stores keep.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// nullJSON is b as a nullable column: NULL when empty.
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
	var finished any = ""
	if !w.FinishedAt.IsZero() {
		finished = sqlrow.FormatTime(w.FinishedAt)
	}
	faults, err := sqlrow.FaultsValue(w)
	if err != nil {
		return nil, err
	}
	return []any{w.ID, w.Tenant, w.Agent, w.AgentVersion, w.Status, w.Outcome, w.Goal, nullJSON(w.Context),
		string(caller), w.MaxToolCalls, nullJSON(w.Output), nullJSON(w.Error), w.ReplayOf, w.RequestID, w.TraceID,
		sqlrow.FormatTime(w.StartedAt), finished, sqlrow.FormatTime(w.Deadline), w.CancelRequested, w.Owner, sqlrow.FormatTime(w.LeaseUntil), string(revs), w.MaxLLMTokens,
		faults, w.OnExhausted, sqlrow.RolloutValue(w)}, nil
}

func collectWorkflows(rows *sql.Rows) ([]*workflow.Workflow, error) {
	defer rows.Close()
	var wfs []*workflow.Workflow
	for rows.Next() {
		w, err := sqlrow.ScanWorkflow(rows)
		if err != nil {
			return nil, err
		}
		wfs = append(wfs, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read workflows: %w", err)
	}
	return wfs, nil
}

// ListWorkflowsPlan is SQLite's plan for ListWorkflows(tenant, f), one line
// per step of EXPLAIN QUERY PLAN: for tests and the console benchmark, which
// check that each filter the console offers walks an index.
func (db *DB) ListWorkflowsPlan(ctx context.Context, tenant string, f workflow.ListFilter) ([]string, error) {
	var plan []string
	err := db.query(ctx, func(tx dbtx) error {
		query, args, err := listWorkflowsQuery(ctx, tx, tenant, f)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `EXPLAIN QUERY PLAN `+query, args...)
		if err != nil {
			return fmt.Errorf("explain list workflows: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				return fmt.Errorf("scan plan: %w", err)
			}
			plan = append(plan, detail)
		}
		return rows.Err()
	})
	return plan, err
}
