package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
	positions := make([]int32, len(workflowIDs))
	for i := range positions {
		positions[i] = int32(i)
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO replay_batches (`+batchColumns+`, lease_owner, lease_until)
			VALUES ($1, $2, $3, $4, '', $5, $6, $7, NULL, $8, $9, $10, $11, $12, $13, $14)`,
			b.ID, b.Tenant, b.Target, b.Status, len(workflowIDs), creator, b.CreatedAt, spec, b.Dataset,
			b.LLM, b.UnrecordedCalls, b.Concurrency, owner, until); err != nil {
			return fmt.Errorf("insert replay batch: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO replay_batch_items (batch_id, position, workflow_id, expected)
			SELECT $1, p, w, NULLIF(e, '') FROM unnest($2::integer[], $3::text[], $4::text[]) AS u(p, w, e)`,
			b.ID, positions, workflowIDs, expected); err != nil {
			return fmt.Errorf("insert replay batch items: %w", err)
		}
		tx.Audit(rec)
		return nil
	})
}

// Batch returns a batch of the tenant with its counts.
func (db *DB) Batch(ctx context.Context, tenant, id string) (*replay.Batch, error) {
	return db.batch(ctx, id, `SELECT `+batchColumns+` FROM replay_batches WHERE tenant = $1 AND id = $2`, tenant, id)
}

// BatchByID returns a batch of any tenant with its counts.
func (db *DB) BatchByID(ctx context.Context, id string) (*replay.Batch, error) {
	return db.batch(ctx, id, `SELECT `+batchColumns+` FROM replay_batches WHERE id = $1`, id)
}

// ListBatches returns the tenant's batches matching f, newest first, with
// how many of each were replayed and changed (their counters).
func (db *DB) ListBatches(ctx context.Context, tenant string, f replay.BatchListFilter) ([]*replay.Batch, error) {
	where := []string{"b.tenant = $1"}
	args := []any{tenant}
	if f.Target != "" {
		args = append(args, f.Target)
		where = append(where, fmt.Sprintf("b.target = $%d", len(args)))
	}
	if f.Before != "" {
		args = append(args, f.Before)
		where = append(where, fmt.Sprintf("b.id < $%d", len(args)))
	}
	args = append(args, page.Size(f.Limit))
	var bs []*replay.Batch
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, fmt.Sprintf(`SELECT b.id, b.tenant, b.target, b.status, b.error, b.total, b.creator, b.created_at, b.finished_at,
			b.spec, b.dataset, b.llm, b.unrecorded_calls, b.concurrency, b.done, b.changed
			FROM replay_batches b
			WHERE %s ORDER BY b.id DESC LIMIT $%d`, strings.Join(where, " AND "), len(args)), args...)
		if err != nil {
			return fmt.Errorf("list replay batches: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var done, changed int32
			b, err := scanBatch(scanFunc(func(dest ...any) error { return rows.Scan(append(dest, &done, &changed)...) }))
			if err != nil {
				return err
			}
			b.Done, b.Changed = int(done), int(changed)
			bs = append(bs, b)
		}
		return rows.Err()
	})
	return bs, err
}

// BatchProgress returns a batch's status and counters: one row.
func (db *DB) BatchProgress(ctx context.Context, tenant, id string) (replay.Progress, error) {
	var p replay.Progress
	err := db.read(ctx, func(q querier) error {
		var total, done, changed int32
		err := q.QueryRow(ctx, `SELECT status, total, done, changed FROM replay_batches WHERE tenant = $1 AND id = $2`,
			tenant, id).Scan(&p.Status, &total, &done, &changed)
		if errors.Is(err, pgx.ErrNoRows) {
			return replay.BatchNotFound(id)
		}
		if err != nil {
			return fmt.Errorf("read replay batch progress: %w", err)
		}
		p.Total, p.Done, p.Changed = int(total), int(done), int(changed)
		return nil
	})
	return p, err
}

func (db *DB) batch(ctx context.Context, id, query string, args ...any) (*replay.Batch, error) {
	var b *replay.Batch
	err := db.read(ctx, func(q querier) error {
		var err error
		if b, err = scanBatch(q.QueryRow(ctx, query, args...)); errors.Is(err, pgx.ErrNoRows) {
			return replay.BatchNotFound(id)
		} else if err != nil {
			return err
		}
		rows, err := q.Query(ctx, `SELECT original_outcome, replay_outcome, count(*),
			sum(steps_added), sum(steps_changed), sum(steps_removed), sum(tool_calls_changed)
			FROM replay_batch_items WHERE batch_id = $1 AND replay_id IS NOT NULL
			GROUP BY original_outcome, replay_outcome`, b.ID)
		if err != nil {
			return fmt.Errorf("count replay batch: %w", err)
		}
		defer rows.Close()
		var cells []replay.BatchCell
		for rows.Next() {
			var c replay.BatchCell
			var n, added, changed, removed, calls int64
			if err := rows.Scan(&c.From, &c.To, &n, &added, &changed, &removed, &calls); err != nil {
				return fmt.Errorf("count replay batch: %w", err)
			}
			c.Count = int(n)
			c.Delta = replay.Delta{StepsAdded: int(added), StepsChanged: int(changed), StepsRemoved: int(removed), ToolCallsChanged: int(calls)}
			cells = append(cells, c)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("count replay batch: %w", err)
		}
		b.Count(cells)
		if err := countChecks(ctx, q, b); err != nil {
			return err
		}
		return batchUsage(ctx, q, b)
	})
	return b, err
}

// countChecks sets the batch's check totals and verdict.
func countChecks(ctx context.Context, q querier, b *replay.Batch) error {
	if b.Spec.Empty() {
		return nil
	}
	rows, err := q.Query(ctx, `SELECT name, result, count(*) FROM replay_batch_checks WHERE batch_id = $1 GROUP BY name, result`, b.ID)
	if err != nil {
		return fmt.Errorf("count replay batch checks: %w", err)
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (replay.CheckCount, error) {
		var c replay.CheckCount
		var n int64
		err := row.Scan(&c.Name, &c.Result, &n)
		c.Count = int(n)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("count replay batch checks: %w", err)
	}
	b.CountChecks(counts)
	return nil
}

// batchUsage sums the usage of the batch's replays, both sides.
func batchUsage(ctx context.Context, q querier, b *replay.Batch) error {
	var cols []string
	for _, side := range replay.UsageSides {
		u := "(r.data->'usage'->'" + side + "')"
		num := func(field string) string { return "(" + u + "->>'" + field + "')::bigint" }
		cols = append(cols, "coalesce(sum("+num("input_tokens")+"), 0)::bigint", "coalesce(sum("+num("output_tokens")+"), 0)::bigint",
			"coalesce(sum("+num("completions")+"), 0)::bigint", "count(*) FILTER (WHERE "+num("completions")+" > 0)",
			"count("+u+"->'cost'->'amount')", "coalesce(sum(("+u+"->'cost'->>'amount')::double precision), 0)",
			"coalesce(min("+u+"->'cost'->>'currency'), '')", "coalesce(max("+u+"->'cost'->>'currency'), '')")
	}
	var t [2]replay.UsageTotals
	dest := make([]any, 0, 16)
	for i := range t {
		dest = append(dest, &t[i].InputTokens, &t[i].OutputTokens, &t[i].Completions, &t[i].Used, &t[i].Priced, &t[i].Cost,
			&t[i].MinCurrency, &t[i].MaxCurrency)
	}
	if err := q.QueryRow(ctx, `SELECT `+strings.Join(cols, ", ")+`
		FROM replay_batch_items i JOIN replays r ON r.id = i.replay_id WHERE i.batch_id = $1`, b.ID).Scan(dest...); err != nil {
		return fmt.Errorf("sum replay batch usage: %w", err)
	}
	b.Usage = replay.Usages{Original: t[0].Usage(), Replay: t[1].Usage()}
	return nil
}

func scanBatch(row pgx.Row) (*replay.Batch, error) {
	var (
		b           replay.Batch
		total, conc int32
		creator     []byte
		finished    *time.Time
		spec        string
	)
	err := row.Scan(&b.ID, &b.Tenant, &b.Target, &b.Status, &b.Error, &total, &creator, &b.CreatedAt, &finished,
		&spec, &b.Dataset, &b.LLM, &b.UnrecordedCalls, &conc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan replay batch: %w", err)
	}
	b.Total, b.Concurrency = int(total), int(conc)
	if err := json.Unmarshal(creator, &b.Creator); err != nil {
		return nil, fmt.Errorf("decode replay batch creator: %w", err)
	}
	if err := json.Unmarshal([]byte(spec), &b.Spec); err != nil {
		return nil, fmt.Errorf("decode replay batch %s checks: %w", b.ID, err)
	}
	b.CreatedAt = b.CreatedAt.UTC()
	if finished != nil {
		t := finished.UTC()
		b.FinishedAt = &t
	}
	return &b, nil
}

// PendingItems returns workflows of the batch without a replay, in order.
func (db *DB) PendingItems(ctx context.Context, batchID string, after, limit int) ([]replay.BatchItem, error) {
	var items []replay.BatchItem
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT position, workflow_id, coalesce(expected, '') FROM replay_batch_items
			WHERE batch_id = $1 AND position > $2 AND replay_id IS NULL ORDER BY position LIMIT $3`, batchID, after, limit)
		if err != nil {
			return fmt.Errorf("list replay batch items: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var it replay.BatchItem
			var pos int32
			var expected string
			if err := rows.Scan(&pos, &it.WorkflowID, &expected); err != nil {
				return fmt.Errorf("scan replay batch item: %w", err)
			}
			if it.Expected, err = replay.DecodeExpectation(expected); err != nil {
				return err
			}
			it.Position = int(pos)
			items = append(items, it)
		}
		return rows.Err()
	})
	return items, err
}

// AddBatchReplays stores replays of the batch's workflows, each once, in
// one statement: the items still without a replay take theirs, only those
// replays are inserted, and the batch's counters count them.
func (db *DB) AddBatchReplays(ctx context.Context, batchID string, rs []replay.BatchReplay) (int, error) {
	n := len(rs)
	var (
		positions                          = make([]int32, n)
		ids, tenants, workflows, targets   = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		fromOutcomes, toOutcomes           = make([]string, n), make([]string, n)
		changed                            = make([]bool, n)
		added, stepsChanged, removed, call = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		created                            = make([]time.Time, n)
		creators, data                     = make([]string, n), make([]string, n)
		failedChecks                       = make([]int32, n)
		// The check results, one row each.
		checkPositions                    []int32
		checkReplays, checkNames, results []string
	)
	for i, br := range rs {
		r := br.Replay
		r.CreatedAt = micro(r.CreatedAt)
		c, d, err := r.Encode()
		if err != nil {
			return 0, err
		}
		positions[i], ids[i], tenants[i], workflows[i], targets[i] = int32(br.Position), r.ID, r.Tenant, r.WorkflowID, r.Target
		fromOutcomes[i], toOutcomes[i], changed[i] = r.OriginalOutcome, r.ReplayOutcome, r.OutcomeChanged()
		added[i], stepsChanged[i] = int32(r.Delta.StepsAdded), int32(r.Delta.StepsChanged)
		removed[i], call[i] = int32(r.Delta.StepsRemoved), int32(r.Delta.ToolCallsChanged)
		created[i], creators[i], data[i] = r.CreatedAt, c, d
		failedChecks[i] = int32(r.FailedChecks())
		for _, cr := range r.Checks {
			checkPositions, checkReplays = append(checkPositions, int32(br.Position)), append(checkReplays, r.ID)
			checkNames, results = append(checkNames, cr.Name), append(results, cr.Result())
		}
	}
	stored := 0
	err := db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `WITH v AS (
				SELECT * FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
					$9::bool[], $10::int[], $11::int[], $12::int[], $13::int[], $14::timestamptz[], $15::text[], $16::text[], $17::int[])
				AS v(position, id, tenant, workflow_id, target, original_outcome, replay_outcome,
					changed, steps_added, steps_changed, steps_removed, tool_calls_changed, created_at, creator, data, failed_checks)
			), taken AS (
				UPDATE replay_batch_items i SET replay_id = v.id, original_outcome = v.original_outcome,
					replay_outcome = v.replay_outcome, changed = v.changed, steps_added = v.steps_added,
					steps_changed = v.steps_changed, steps_removed = v.steps_removed, tool_calls_changed = v.tool_calls_changed,
					failed_checks = v.failed_checks
				FROM v WHERE i.batch_id = $1 AND i.position = v.position AND i.workflow_id = v.workflow_id AND i.replay_id IS NULL
				RETURNING i.replay_id, i.changed
			), counted AS (
				UPDATE replay_batches SET done = done + (SELECT count(*) FROM taken),
					changed = changed + (SELECT count(*) FROM taken WHERE taken.changed)
				WHERE id = $1 AND EXISTS (SELECT FROM taken)
			)
			INSERT INTO replays (`+sqlrow.ReplayColumns+`)
			SELECT v.id, v.tenant, v.workflow_id, v.target, v.created_at, v.creator::json, v.data::json
			FROM v JOIN taken ON taken.replay_id = v.id`,
			batchID, positions, ids, tenants, workflows, targets, fromOutcomes, toOutcomes,
			changed, added, stepsChanged, removed, call, created, creators, data, failedChecks)
		if err != nil {
			return fmt.Errorf("store batch replays: %w", err)
		}
		stored = int(tag.RowsAffected())
		if len(checkNames) == 0 || stored == 0 {
			return nil
		}
		// Only the results of the replays stored here: an item's replay_id
		// is this replay's when it took it.
		if _, err := tx.Exec(ctx, `INSERT INTO replay_batch_checks (batch_id, position, name, result)
			SELECT $1, c.position, c.name, c.result
			FROM unnest($2::int[], $3::text[], $4::text[], $5::text[]) AS c(position, replay_id, name, result)
			JOIN replay_batch_items i ON i.batch_id = $1 AND i.position = c.position AND i.replay_id = c.replay_id`,
			batchID, checkPositions, checkReplays, checkNames, results); err != nil {
			return fmt.Errorf("store batch check results: %w", err)
		}
		return nil
	})
	return stored, err
}

// BatchReplays pages the batch's replays, changed outcomes first.
func (db *DB) BatchReplays(ctx context.Context, batchID string, changedOnly bool, offset, limit int) ([]*replay.Replay, error) {
	cond := ""
	if changedOnly {
		cond = " AND i.changed"
	}
	var rs []*replay.Replay
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT r.id, r.tenant, r.workflow_id, r.target, r.created_at, r.creator, r.data
			FROM replay_batch_items i JOIN replays r ON r.id = i.replay_id
			WHERE i.batch_id = $1`+cond+` ORDER BY i.changed DESC, i.position LIMIT $2 OFFSET $3`, batchID, limit, offset)
		if err != nil {
			return fmt.Errorf("list batch replays: %w", err)
		}
		rs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*replay.Replay, error) { return sqlrow.ScanReplay(row) })
		if err != nil {
			return fmt.Errorf("read batch replays: %w", err)
		}
		return nil
	})
	return rs, err
}

// FailedCheckReplays pages the batch's replays that failed a check, in
// batch order.
func (db *DB) FailedCheckReplays(ctx context.Context, batchID string, offset, limit int) ([]*replay.Replay, error) {
	var rs []*replay.Replay
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT r.id, r.tenant, r.workflow_id, r.target, r.created_at, r.creator, r.data
			FROM replay_batch_items i JOIN replays r ON r.id = i.replay_id
			WHERE i.batch_id = $1 AND i.failed_checks > 0 ORDER BY i.position LIMIT $2 OFFSET $3`, batchID, limit, offset)
		if err != nil {
			return fmt.Errorf("list batch replays that failed a check: %w", err)
		}
		rs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*replay.Replay, error) { return sqlrow.ScanReplay(row) })
		if err != nil {
			return fmt.Errorf("read batch replays that failed a check: %w", err)
		}
		return nil
	})
	return rs, err
}

// FinishBatch moves a running batch to status and drops its lease.
func (db *DB) FinishBatch(ctx context.Context, id, status, errMsg string, at time.Time) (bool, error) {
	var ok bool
	err := db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE replay_batches SET status = $1, error = $2, finished_at = $3, lease_owner = '', lease_until = '-infinity'
			WHERE id = $4 AND status = 'running'`, status, errMsg, micro(at), id)
		if err != nil {
			return fmt.Errorf("finish replay batch: %w", err)
		}
		if ok = tag.RowsAffected() == 1; !ok {
			return nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM replay_batch_journal WHERE batch_id = $1`, id); err != nil {
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
	err := db.write(ctx, func(tx *wtx) error {
		id = ""
		err := tx.QueryRow(ctx, `UPDATE replay_batches SET lease_owner = $1, lease_until = $2
			WHERE id = (SELECT id FROM replay_batches WHERE status = 'running' AND (lease_until < $3 OR lease_owner = $1)
				ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING id`, owner, until, now).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
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
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE replay_batches SET lease_until = $1
			WHERE id = $2 AND status = 'running' AND lease_owner = $3`, until, id, owner)
		if err != nil {
			return fmt.Errorf("renew replay batch: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return problem.New(problem.Conflict, "replay batch %s is no longer running here", id)
		}
		return nil
	})
}

// JournalCompletion keeps a live completion of a batch's replay, once.
func (db *DB) JournalCompletion(ctx context.Context, batchID, workflowID string, n int, requestSHA256 string, data []byte) error {
	return db.write(ctx, func(tx *wtx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO replay_batch_journal (batch_id, workflow_id, n, request_sha256, data)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, batchID, workflowID, n, requestSHA256, string(data)); err != nil {
			return fmt.Errorf("journal replay completion: %w", err)
		}
		return nil
	})
}

// JournaledCompletions returns the completions journaled for a batch's workflow.
func (db *DB) JournaledCompletions(ctx context.Context, batchID, workflowID string) ([][]byte, error) {
	var out [][]byte
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT data FROM replay_batch_journal WHERE batch_id = $1 AND workflow_id = $2`, batchID, workflowID)
		if err != nil {
			return fmt.Errorf("read replay batch journal: %w", err)
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]byte, error) {
			var d string
			err := row.Scan(&d)
			return []byte(d), err
		})
		if err != nil {
			return fmt.Errorf("read replay batch journal: %w", err)
		}
		return nil
	})
	return out, err
}
