package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

var _ replay.BatchStore = (*DB)(nil)

const batchColumns = `id, tenant, target, status, error, total, creator, created_at, finished_at, spec, dataset, llm, unrecorded_calls, concurrency`

// CreateBatch stores a running batch and its workflows, leased to owner.
func (db *DB) CreateBatch(ctx context.Context, b *replay.Batch, workflowIDs []string, owner string, until time.Time, rec *audit.Record) error {
	b.CreatedAt = micro(b.CreatedAt)
	creator, err := json.Marshal(b.Creator)
	if err != nil {
		return fmt.Errorf("encode batch creator: %w", err)
	}
	spec, expected, err := replay.EncodeBatchChecks(b, workflowIDs)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO replay_batches (`+batchColumns+`, lease_owner, lease_until)
			VALUES (?, ?, ?, ?, '', ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)`,
			b.ID, b.Tenant, b.Target, b.Status, len(workflowIDs), string(creator), fmtTime(b.CreatedAt), spec, b.Dataset,
			b.LLM, b.UnrecordedCalls, b.Concurrency, owner, fmtTime(until)); err != nil {
			return fmt.Errorf("insert replay batch: %w", err)
		}
		const chunk = 500
		for start := 0; start < len(workflowIDs); start += chunk {
			part := workflowIDs[start:min(start+chunk, len(workflowIDs))]
			args := make([]any, 0, 4*len(part))
			for i, id := range part {
				args = append(args, b.ID, start+i, id, expected[start+i])
			}
			q := `INSERT INTO replay_batch_items (batch_id, position, workflow_id, expected) VALUES (?, ?, ?, ?)` +
				strings.Repeat(`, (?, ?, ?, ?)`, len(part)-1)
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return fmt.Errorf("insert replay batch items: %w", err)
			}
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Batch returns a batch of the tenant with its counts.
func (db *DB) Batch(ctx context.Context, tenant, id string) (*replay.Batch, error) {
	return db.batch(ctx, `SELECT `+batchColumns+` FROM replay_batches WHERE tenant = ? AND id = ?`, tenant, id)
}

// BatchByID returns a batch of any tenant with its counts.
func (db *DB) BatchByID(ctx context.Context, id string) (*replay.Batch, error) {
	return db.batch(ctx, `SELECT `+batchColumns+` FROM replay_batches WHERE id = ?`, id)
}

// ListBatches returns the tenant's batches matching f, newest first, with
// how many of each were replayed and changed (their counters).
func (db *DB) ListBatches(ctx context.Context, tenant string, f replay.BatchListFilter) ([]*replay.Batch, error) {
	where := []string{"b.tenant = ?"}
	args := []any{tenant}
	if f.Target != "" {
		where, args = append(where, "b.target = ?"), append(args, f.Target)
	}
	if f.Before != "" {
		where, args = append(where, "b.id < ?"), append(args, f.Before)
	}
	var bs []*replay.Batch
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT b.id, b.tenant, b.target, b.status, b.error, b.total, b.creator, b.created_at, b.finished_at,
			b.spec, b.dataset, b.llm, b.unrecorded_calls, b.concurrency, b.done, b.changed
			FROM replay_batches b
			WHERE `+strings.Join(where, " AND ")+` ORDER BY b.id DESC LIMIT ?`, append(args, page.Size(f.Limit))...)
		if err != nil {
			return fmt.Errorf("list replay batches: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var done, changed int
			b, err := scanBatch(scanFunc(func(dest ...any) error { return rows.Scan(append(dest, &done, &changed)...) }))
			if err != nil {
				return err
			}
			b.Done, b.Changed = done, changed
			bs = append(bs, b)
		}
		return rows.Err()
	})
	return bs, err
}

// BatchProgress returns a batch's status and counters: one row.
func (db *DB) BatchProgress(ctx context.Context, tenant, id string) (replay.Progress, error) {
	var p replay.Progress
	err := db.query(ctx, func(tx dbtx) error {
		err := tx.QueryRowContext(ctx, `SELECT status, total, done, changed FROM replay_batches WHERE tenant = ? AND id = ?`,
			tenant, id).Scan(&p.Status, &p.Total, &p.Done, &p.Changed)
		if err == sql.ErrNoRows {
			return replay.BatchNotFound(id)
		}
		if err != nil {
			return fmt.Errorf("read replay batch progress: %w", err)
		}
		return nil
	})
	return p, err
}

func (db *DB) batch(ctx context.Context, query string, args ...any) (*replay.Batch, error) {
	var b *replay.Batch
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		if b, err = scanBatch(tx.QueryRowContext(ctx, query, args...)); err == sql.ErrNoRows {
			return replay.BatchNotFound(args[len(args)-1].(string))
		} else if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT original_outcome, replay_outcome, count(*),
			sum(steps_added), sum(steps_changed), sum(steps_removed), sum(tool_calls_changed)
			FROM replay_batch_items WHERE batch_id = ? AND replay_id IS NOT NULL
			GROUP BY original_outcome, replay_outcome`, b.ID)
		if err != nil {
			return fmt.Errorf("count replay batch: %w", err)
		}
		defer rows.Close()
		var cells []replay.BatchCell
		for rows.Next() {
			var c replay.BatchCell
			if err := rows.Scan(&c.From, &c.To, &c.Count, &c.Delta.StepsAdded, &c.Delta.StepsChanged,
				&c.Delta.StepsRemoved, &c.Delta.ToolCallsChanged); err != nil {
				return fmt.Errorf("count replay batch: %w", err)
			}
			cells = append(cells, c)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("count replay batch: %w", err)
		}
		b.Count(cells)
		if err := db.countChecks(ctx, tx, b); err != nil {
			return err
		}
		return batchUsage(ctx, tx, b)
	})
	return b, err
}

// countChecks sets the batch's check totals and verdict.
func (db *DB) countChecks(ctx context.Context, tx dbtx, b *replay.Batch) error {
	if b.Spec.Empty() {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, result, count(*) FROM replay_batch_checks WHERE batch_id = ? GROUP BY name, result`, b.ID)
	if err != nil {
		return fmt.Errorf("count replay batch checks: %w", err)
	}
	defer rows.Close()
	var counts []replay.CheckCount
	for rows.Next() {
		var c replay.CheckCount
		if err := rows.Scan(&c.Name, &c.Result, &c.Count); err != nil {
			return fmt.Errorf("count replay batch checks: %w", err)
		}
		counts = append(counts, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count replay batch checks: %w", err)
	}
	b.CountChecks(counts)
	return nil
}

// batchUsage sums the usage of the batch's replays, both sides.
func batchUsage(ctx context.Context, tx dbtx, b *replay.Batch) error {
	var cols []string
	for _, side := range replay.UsageSides {
		f := func(path string) string { return "json_extract(r.data, '$.usage." + side + "." + path + "')" }
		cols = append(cols, "coalesce(sum("+f("input_tokens")+"), 0)", "coalesce(sum("+f("output_tokens")+"), 0)",
			"coalesce(sum("+f("completions")+"), 0)", "count(CASE WHEN "+f("completions")+" > 0 THEN 1 END)",
			"count("+f("cost.amount")+")", "coalesce(sum("+f("cost.amount")+"), 0)",
			"coalesce(min("+f("cost.currency")+"), '')", "coalesce(max("+f("cost.currency")+"), '')")
	}
	var t [2]replay.UsageTotals
	dest := make([]any, 0, 16)
	for i := range t {
		dest = append(dest, &t[i].InputTokens, &t[i].OutputTokens, &t[i].Completions, &t[i].Used, &t[i].Priced, &t[i].Cost,
			&t[i].MinCurrency, &t[i].MaxCurrency)
	}
	if err := tx.QueryRowContext(ctx, `SELECT `+strings.Join(cols, ", ")+`
		FROM replay_batch_items i JOIN replays r ON r.id = i.replay_id WHERE i.batch_id = ?`, b.ID).Scan(dest...); err != nil {
		return fmt.Errorf("sum replay batch usage: %w", err)
	}
	b.Usage = replay.Usages{Original: t[0].Usage(), Replay: t[1].Usage()}
	return nil
}

func scanBatch(s scanner) (*replay.Batch, error) {
	var (
		b                replay.Batch
		creator, created string
		finished         sql.NullString
		spec             string
	)
	err := s.Scan(&b.ID, &b.Tenant, &b.Target, &b.Status, &b.Error, &b.Total, &creator, &created, &finished,
		&spec, &b.Dataset, &b.LLM, &b.UnrecordedCalls, &b.Concurrency)
	if err == sql.ErrNoRows {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan replay batch: %w", err)
	}
	if err := json.Unmarshal([]byte(creator), &b.Creator); err != nil {
		return nil, fmt.Errorf("decode replay batch creator: %w", err)
	}
	if err := json.Unmarshal([]byte(spec), &b.Spec); err != nil {
		return nil, fmt.Errorf("decode replay batch %s checks: %w", b.ID, err)
	}
	if b.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if finished.Valid {
		t, err := parseTime(finished.String)
		if err != nil {
			return nil, err
		}
		b.FinishedAt = &t
	}
	return &b, nil
}

// PendingItems returns workflows of the batch without a replay, in order.
func (db *DB) PendingItems(ctx context.Context, batchID string, after, limit int) ([]replay.BatchItem, error) {
	var items []replay.BatchItem
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT position, workflow_id, expected FROM replay_batch_items
			WHERE batch_id = ? AND position > ? AND replay_id IS NULL ORDER BY position LIMIT ?`, batchID, after, limit)
		if err != nil {
			return fmt.Errorf("list replay batch items: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var it replay.BatchItem
			var expected sql.NullString
			if err := rows.Scan(&it.Position, &it.WorkflowID, &expected); err != nil {
				return fmt.Errorf("scan replay batch item: %w", err)
			}
			if it.Expected, err = replay.DecodeExpectation(expected.String); err != nil {
				return err
			}
			items = append(items, it)
		}
		return rows.Err()
	})
	return items, err
}

// AddBatchReplays stores replays of the batch's workflows, each once, and
// counts those it stored in the batch's counters.
func (db *DB) AddBatchReplays(ctx context.Context, batchID string, rs []replay.BatchReplay) (int, error) {
	type encoded struct{ creator, data string }
	enc := make([]encoded, len(rs))
	for i, br := range rs {
		br.Replay.CreatedAt = micro(br.Replay.CreatedAt)
		c, d, err := br.Replay.Encode()
		if err != nil {
			return 0, err
		}
		enc[i] = encoded{c, d}
	}
	stored := 0
	err := db.write(ctx, func(tx dbtx) error {
		stored = 0
		changed := 0
		for i, br := range rs {
			r := br.Replay
			res, err := tx.ExecContext(ctx, `UPDATE replay_batch_items SET replay_id = ?, original_outcome = ?, replay_outcome = ?,
				changed = ?, steps_added = ?, steps_changed = ?, steps_removed = ?, tool_calls_changed = ?, failed_checks = ?
				WHERE batch_id = ? AND position = ? AND workflow_id = ? AND replay_id IS NULL`,
				r.ID, r.OriginalOutcome, r.ReplayOutcome, r.OutcomeChanged(), r.Delta.StepsAdded, r.Delta.StepsChanged,
				r.Delta.StepsRemoved, r.Delta.ToolCallsChanged, r.FailedChecks(), batchID, br.Position, r.WorkflowID)
			if err != nil {
				return fmt.Errorf("update replay batch item: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("update replay batch item: %w", err)
			} else if n == 0 {
				continue // replayed already
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO replays (`+sqlrow.ReplayColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				r.ID, r.Tenant, r.WorkflowID, r.Target, fmtTime(r.CreatedAt), enc[i].creator, enc[i].data); err != nil {
				return fmt.Errorf("insert replay: %w", err)
			}
			for _, c := range r.Checks {
				if _, err := tx.ExecContext(ctx, `INSERT INTO replay_batch_checks (batch_id, position, name, result) VALUES (?, ?, ?, ?)`,
					batchID, br.Position, c.Name, c.Result()); err != nil {
					return fmt.Errorf("insert replay check result: %w", err)
				}
			}
			stored++
			if r.OutcomeChanged() {
				changed++
			}
		}
		if stored == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE replay_batches SET done = done + ?, changed = changed + ? WHERE id = ?`,
			stored, changed, batchID); err != nil {
			return fmt.Errorf("count replay batch: %w", err)
		}
		return nil
	})
	return stored, err
}

// BatchReplays pages the batch's replays, changed outcomes first.
func (db *DB) BatchReplays(ctx context.Context, batchID string, changedOnly bool, offset, limit int) ([]*replay.Replay, error) {
	cond := ""
	if changedOnly {
		cond = " AND i.changed = 1"
	}
	var rs []*replay.Replay
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT r.id, r.tenant, r.workflow_id, r.target, r.created_at, r.creator, r.data
			FROM replay_batch_items i JOIN replays r ON r.id = i.replay_id
			WHERE i.batch_id = ?`+cond+` ORDER BY i.changed DESC, i.position LIMIT ? OFFSET ?`, batchID, limit, offset)
		if err != nil {
			return fmt.Errorf("list batch replays: %w", err)
		}
		rs, err = scanReplays(rows)
		return err
	})
	return rs, err
}

// FailedCheckReplays pages the batch's replays that failed a check, in
// batch order.
func (db *DB) FailedCheckReplays(ctx context.Context, batchID string, offset, limit int) ([]*replay.Replay, error) {
	var rs []*replay.Replay
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT r.id, r.tenant, r.workflow_id, r.target, r.created_at, r.creator, r.data
			FROM replay_batch_items i JOIN replays r ON r.id = i.replay_id
			WHERE i.batch_id = ? AND i.failed_checks > 0 ORDER BY i.position LIMIT ? OFFSET ?`, batchID, limit, offset)
		if err != nil {
			return fmt.Errorf("list batch replays that failed a check: %w", err)
		}
		rs, err = scanReplays(rows)
		return err
	})
	return rs, err
}

// FinishBatch moves a running batch to status and drops its lease.
func (db *DB) FinishBatch(ctx context.Context, id, status, errMsg string, at time.Time) (bool, error) {
	var ok bool
	err := db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE replay_batches SET status = ?, error = ?, finished_at = ?, lease_owner = '', lease_until = ''
			WHERE id = ? AND status = 'running'`, status, errMsg, fmtTime(micro(at)), id)
		if err != nil {
			return fmt.Errorf("finish replay batch: %w", err)
		}
		n, err := res.RowsAffected()
		if ok = n == 1; !ok || err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM replay_batch_journal WHERE batch_id = ?`, id); err != nil {
			return fmt.Errorf("drop replay batch journal: %w", err)
		}
		return queueBatchEvent(ctx, tx, id, status, errMsg, at) // webhooks.go: the outbox
	})
	return ok, err
}

// ClaimBatch leases a running batch whose lease has expired, or that is
// leased to owner already (one it accepted and has not started).
func (db *DB) ClaimBatch(ctx context.Context, owner string, now, until time.Time) (*replay.Batch, error) {
	var id string
	err := db.write(ctx, func(tx dbtx) error {
		err := tx.QueryRowContext(ctx, `UPDATE replay_batches SET lease_owner = ?, lease_until = ?
			WHERE id = (SELECT id FROM replay_batches WHERE status = 'running' AND (lease_until < ? OR lease_owner = ?) ORDER BY id LIMIT 1)
			RETURNING id`, owner, fmtTime(until), fmtTime(now), owner).Scan(&id)
		if err == sql.ErrNoRows {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim replay batch: %w", err)
	}
	if id == "" {
		return nil, nil
	}
	return db.BatchByID(ctx, id)
}

// RenewBatch extends owner's lease of a running batch.
func (db *DB) RenewBatch(ctx context.Context, id, owner string, until time.Time) error {
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE replay_batches SET lease_until = ?
			WHERE id = ? AND status = 'running' AND lease_owner = ?`, fmtTime(until), id, owner)
		if err != nil {
			return fmt.Errorf("renew replay batch: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("renew replay batch: %w", err)
		} else if n == 0 {
			return problem.New(problem.Conflict, "replay batch %s is no longer running here", id)
		}
		return nil
	})
}

// JournalCompletion keeps a live completion of a batch's replay, once.
func (db *DB) JournalCompletion(ctx context.Context, batchID, workflowID string, n int, requestSHA256 string, data []byte) error {
	return db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO replay_batch_journal (batch_id, workflow_id, n, request_sha256, data)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, batchID, workflowID, n, requestSHA256, string(data)); err != nil {
			return fmt.Errorf("journal replay completion: %w", err)
		}
		return nil
	})
}

// JournaledCompletions returns the completions journaled for a batch's workflow.
func (db *DB) JournaledCompletions(ctx context.Context, batchID, workflowID string) ([][]byte, error) {
	var out [][]byte
	err := db.query(ctx, func(tx dbtx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, `SELECT data FROM replay_batch_journal WHERE batch_id = ? AND workflow_id = ?`, batchID, workflowID)
		if err != nil {
			return fmt.Errorf("read replay batch journal: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				return fmt.Errorf("read replay batch journal: %w", err)
			}
			out = append(out, []byte(d))
		}
		return rows.Err()
	})
	return out, err
}
