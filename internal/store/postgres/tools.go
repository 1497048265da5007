package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/tool"
)

// CreateTool stores t and its operations; problem.Conflict when the name is taken.
func (db *DB) CreateTool(ctx context.Context, t *tool.Tool, ops []tool.Operation, rec *audit.Record) error {
	row, err := sqlrow.ToolValues(t, sqlrow.Timestamp)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(ctx, `INSERT INTO tools (`+sqlrow.ToolColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`, row...)
		if isUnique(err) {
			return problem.New(problem.Conflict, "a tool named %q already exists", t.Name)
		}
		if err != nil {
			return fmt.Errorf("insert tool: %w", err)
		}
		if err := insertOperations(ctx, tx, t, ops); err != nil {
			return err
		}
		if err := scheduleRefresh(ctx, tx, t); err != nil {
			return err
		}
		tx.Audit(rec)
		return nil
	})
}

// UpdateTool replaces t (same id and tenant) and its operations.
func (db *DB) UpdateTool(ctx context.Context, t *tool.Tool, ops []tool.Operation, rec *audit.Record) error {
	row, err := sqlrow.ToolValues(t, sqlrow.Timestamp)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		if err := replaceTool(ctx, tx, t, row, ops, -1); err != nil {
			return err
		}
		tx.Audit(rec)
		return nil
	})
}

// replaceTool keeps a snapshot of the tool's current revision and replaces
// it by t (row its ToolValues) and ops; with a base of 0 or more, only while
// the tool is still at that revision (problem.Conflict otherwise).
func replaceTool(ctx context.Context, tx *wtx, t *tool.Tool, row []any, ops []tool.Operation, base int) error {
	if err := snapshotTool(ctx, tx, t.Tenant, t.ID); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `UPDATE tools SET name = $3, type = $4, spec_url = $5,
		endpoint_url = $6, auth = $7, policy_class = $8, side_effects = $9, idempotency_support = $10,
		spec_sha256 = $11, revision = $12, operation_count = $13, base_url = $14, spec_token_url = $15,
		indexed_at = $16, created_at = $17, updated_at = $18, limits = $19
		WHERE id = $1 AND tenant = $2 AND ($20::integer < 0 OR revision = $20)`, append(row, base)...)
	if isUnique(err) {
		return problem.New(problem.Conflict, "a tool named %q already exists", t.Name)
	}
	if err != nil {
		return fmt.Errorf("update tool: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if base >= 0 {
			if err := toolExists(ctx, tx, t.Tenant, t.ID); err != nil {
				return err
			}
			return problem.New(problem.Conflict, "tool %s changed since its revision %d: refresh again", t.ID, base)
		}
		return toolNotFound(t.ID)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM tool_operations WHERE tool_id = $1`, t.ID); err != nil {
		return fmt.Errorf("delete operations: %w", err)
	}
	if err := scheduleRefresh(ctx, tx, t); err != nil {
		return err
	}
	return insertOperations(ctx, tx, t, ops)
}

// DeleteTool deletes a tool and its operations; problem.Conflict while an
// agent version names it.
func (db *DB) DeleteTool(ctx context.Context, tenant, id string, rec *audit.Record) error {
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		var name string
		err := tx.QueryRow(ctx, `SELECT name FROM tools WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id).Scan(&name)
		if errors.Is(err, pgx.ErrNoRows) {
			return toolNotFound(id)
		}
		if err != nil {
			return fmt.Errorf("load tool: %w", err)
		}
		var agent, version string
		err = tx.QueryRow(ctx, `SELECT agent, version FROM agent_version_tools
			WHERE tenant = $1 AND tool_name = $2 ORDER BY agent, version LIMIT 1`, tenant, name).Scan(&agent, &version)
		if err == nil {
			return problem.New(problem.Conflict, "tool %q is used by agent %q version %q: archive that version first (DELETE /v1/agents/%s@%s)", name, agent, version, agent, version)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("check tool use: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tool_operations WHERE tool_id = $1`, id); err != nil {
			return fmt.Errorf("delete operations: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tool_snapshots WHERE tenant = $1 AND id = $2`, tenant, id); err != nil {
			return fmt.Errorf("delete snapshots: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tool_refreshes WHERE tenant = $1 AND tool_id = $2`, tenant, id); err != nil {
			return fmt.Errorf("delete refreshes: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tools WHERE tenant = $1 AND id = $2`, tenant, id); err != nil {
			return fmt.Errorf("delete tool: %w", err)
		}
		tx.Audit(rec)
		return nil
	})
}

// Tool returns a tool by id, or problem.NotFound.
func (db *DB) Tool(ctx context.Context, tenant, id string) (*tool.Tool, error) {
	var t *tool.Tool
	err := db.read(ctx, func(tx querier) error {
		var err error
		t, err = sqlrow.ScanTool(tx.QueryRow(ctx, `SELECT `+sqlrow.ToolColumns+` FROM tools WHERE tenant = $1 AND id = $2`, tenant, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return toolNotFound(id)
		}
		return err
	})
	return t, err
}

// ToolByName returns a tool by name, or problem.NotFound.
func (db *DB) ToolByName(ctx context.Context, tenant, name string) (*tool.Tool, error) {
	var t *tool.Tool
	err := db.read(ctx, func(tx querier) error {
		var err error
		t, err = sqlrow.ScanTool(tx.QueryRow(ctx, `SELECT `+sqlrow.ToolColumns+` FROM tools WHERE tenant = $1 AND name = $2`, tenant, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.New(problem.NotFound, "no tool named %q", name)
		}
		return err
	})
	return t, err
}

// ListTools returns tools ordered by id, after opt.After.
func (db *DB) ListTools(ctx context.Context, tenant string, opt tool.ListOptions) ([]*tool.Tool, error) {
	limit := page.Size(opt.Limit)
	var ts []*tool.Tool
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT `+sqlrow.ToolColumns+` FROM tools
			WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3`, tenant, opt.After, limit)
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		ts, err = collect(rows, sqlrow.ScanTool)
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		return nil
	})
	return ts, err
}

// Operations returns a tool's operations ordered by id, those whose id,
// summary or description contain q (case-insensitively) when q is not "".
func (db *DB) Operations(ctx context.Context, tenant, toolID, q string) ([]tool.Operation, error) {
	var ops []tool.Operation
	err := db.read(ctx, func(tx querier) error {
		if err := toolExists(ctx, tx, tenant, toolID); err != nil {
			return err
		}
		pat := likePattern(q)
		rows, err := tx.Query(ctx, `SELECT data FROM tool_operations
			WHERE tenant = $1 AND tool_id = $2
			  AND ($3 = '' OR op_id ILIKE $4 OR summary ILIKE $4 OR description ILIKE $4)
			ORDER BY op_id COLLATE "C"`, tenant, toolID, q, pat)
		if err != nil {
			return fmt.Errorf("query operations: %w", err)
		}
		ops, err = collect(rows, sqlrow.ScanOperation)
		if err != nil {
			return fmt.Errorf("query operations: %w", err)
		}
		return nil
	})
	return ops, err
}

// Operation returns one operation, or problem.NotFound.
func (db *DB) Operation(ctx context.Context, tenant, toolID, opID string) (*tool.Operation, error) {
	var op tool.Operation
	err := db.read(ctx, func(tx querier) error {
		if err := toolExists(ctx, tx, tenant, toolID); err != nil {
			return err
		}
		var data []byte
		err := tx.QueryRow(ctx, `SELECT data FROM tool_operations WHERE tenant = $1 AND tool_id = $2 AND op_id = $3`,
			tenant, toolID, opID).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.New(problem.NotFound, "tool %s has no operation %q", toolID, opID)
		}
		if err != nil {
			return fmt.Errorf("load operation: %w", err)
		}
		if err := json.Unmarshal(data, &op); err != nil {
			return fmt.Errorf("decode operation: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &op, nil
}

// ToolRevision returns the tool named name as it was at revision, with its
// operations, from the snapshot kept when an update replaced it, or
// problem.NotFound.
func (db *DB) ToolRevision(ctx context.Context, tenant, name string, revision int) (*tool.Tool, []tool.Operation, error) {
	var (
		t   *tool.Tool
		ops []tool.Operation
	)
	err := db.read(ctx, func(tx querier) error {
		var data []byte
		var err error
		t, err = sqlrow.ScanTool(sqlrow.With(tx.QueryRow(ctx, `SELECT `+sqlrow.ToolColumns+`, operations FROM tool_snapshots
			WHERE tenant = $1 AND name = $2 AND revision = $3 ORDER BY updated_at DESC LIMIT 1`, tenant, name, revision), &data))
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.New(problem.NotFound, "no snapshot of tool %q at revision %d", name, revision)
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &ops); err != nil {
			return fmt.Errorf("decode operations of %s@%d: %w", name, revision, err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return t, ops, nil
}

// snapshotTool keeps the revision of a tool an update is about to replace,
// and drops its older snapshots that no unfinished workflow started with.
func snapshotTool(ctx context.Context, tx *wtx, tenant, id string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO tool_snapshots (`+sqlrow.ToolColumns+`, operations)
		SELECT `+sqlrow.ToolColumns+`, COALESCE((SELECT json_agg(data ORDER BY op_id) FROM tool_operations
			WHERE tool_id = t.id), '[]')
		FROM tools t WHERE t.tenant = $1 AND t.id = $2
		ON CONFLICT DO NOTHING`, tenant, id); err != nil {
		return fmt.Errorf("snapshot tool: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM tool_snapshots s
		WHERE s.tenant = $1 AND s.id = $2 AND s.revision < (SELECT revision FROM tools WHERE tenant = $1 AND id = $2)
		  AND NOT EXISTS (SELECT 1 FROM workflows w WHERE w.tenant = s.tenant AND w.status IN ('running', 'waiting')
			AND w.tool_revisions -> s.name = to_jsonb(s.revision))`, tenant, id); err != nil {
		return fmt.Errorf("drop tool snapshots: %w", err)
	}
	return nil
}

func toolNotFound(id string) error { return problem.New(problem.NotFound, "no tool with id %q", id) }

func toolExists(ctx context.Context, tx querier, tenant, id string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM tools WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return toolNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("load tool: %w", err)
	}
	return nil
}

// insertOperations copies ops in with one round trip per batch.
func insertOperations(ctx context.Context, tx *wtx, t *tool.Tool, ops []tool.Operation) error {
	if len(ops) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(ops))
	rows := make([][]any, 0, len(ops))
	for _, op := range ops {
		if seen[op.ID] {
			return problem.Field("spec", "operation id %q appears twice", op.ID)
		}
		seen[op.ID] = true
		row, err := sqlrow.OperationValues(t, op)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"tool_operations"}, sqlrow.OperationColumns, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("insert operations: %w", err)
	}
	return nil
}

// toolDeleted answers a deploy that lost a race with DeleteTool; name is
// the tool, when known.
func toolDeleted(name string) error {
	if name == "" {
		return problem.New(problem.Conflict, "a tool this version names was deleted while it was being deployed")
	}
	return problem.New(problem.Conflict, "tool %q was deleted while this version was being deployed", name)
}

// scheduleRefresh keeps t's scheduled refresh in step with its refresh:
// none without one; a refresh set or changed is first due its duration
// after t.UpdatedAt; an unchanged one keeps its due time.
func scheduleRefresh(ctx context.Context, tx *wtx, t *tool.Tool) error {
	var next *time.Time
	if d := t.RefreshEvery(); d > 0 {
		n := micro(t.UpdatedAt.Add(d))
		next = &n
	}
	if _, err := tx.Exec(ctx, `UPDATE tools SET refresh_set = $1,
		refresh_next = CASE WHEN $2::timestamptz IS NULL THEN NULL
			WHEN refresh_set = $1 AND refresh_next IS NOT NULL THEN refresh_next ELSE $2::timestamptz END
		WHERE tenant = $3 AND id = $4`, t.Refresh, next, t.Tenant, t.ID); err != nil {
		return fmt.Errorf("schedule tool refresh: %w", err)
	}
	return nil
}

// DueToolRefreshes returns up to limit tools, of every tenant, whose
// scheduled refresh is due at now, soonest first.
func (db *DB) DueToolRefreshes(ctx context.Context, now time.Time, limit int) ([]*tool.Tool, error) {
	var out []*tool.Tool
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT `+sqlrow.ToolColumns+`, refresh_next FROM tools
			WHERE refresh_next IS NOT NULL AND refresh_next <= $1 ORDER BY refresh_next LIMIT $2`, now, limit)
		if err != nil {
			return fmt.Errorf("list due tool refreshes: %w", err)
		}
		out, err = collect(rows, func(s sqlrow.Scanner) (*tool.Tool, error) {
			var due time.Time
			t, err := sqlrow.ScanTool(sqlrow.With(s, &due))
			if t != nil {
				t.RefreshDue = due.UTC()
			}
			return t, err
		})
		return err
	})
	return out, err
}

// ClaimToolRefresh moves a tool's next refresh from due to next, when it
// is still at due.
func (db *DB) ClaimToolRefresh(ctx context.Context, tenant, id string, due, next time.Time) (bool, error) {
	var won bool
	err := db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE tools SET refresh_next = $1
			WHERE tenant = $2 AND id = $3 AND refresh_next = $4`, micro(next), tenant, id, due)
		if err != nil {
			return fmt.Errorf("claim tool refresh: %w", err)
		}
		won = tag.RowsAffected() == 1
		return nil
	})
	return won, err
}
