package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/tool"
)

// CreateTool stores t and its operations; problem.Conflict when the name is taken.
func (db *DB) CreateTool(ctx context.Context, t *tool.Tool, ops []tool.Operation, rec *audit.Record) error {
	row, err := sqlrow.ToolValues(t, sqlrow.FormatTime)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tools (`+sqlrow.ToolColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, row...)
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
		return appendAudit(ctx, tx, rec)
	})
}

// UpdateTool replaces t (same id and tenant) and its operations.
func (db *DB) UpdateTool(ctx context.Context, t *tool.Tool, ops []tool.Operation, rec *audit.Record) error {
	row, err := sqlrow.ToolValues(t, sqlrow.FormatTime)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		if err := replaceTool(ctx, tx, t, row, ops, -1); err != nil {
			return err
		}
		return appendAudit(ctx, tx, rec)
	})
}

// replaceTool keeps a snapshot of the tool's current revision and replaces
// it by t (row its ToolValues) and ops; with a base of 0 or more, only while
// the tool is still at that revision (problem.Conflict otherwise).
func replaceTool(ctx context.Context, tx dbtx, t *tool.Tool, row []any, ops []tool.Operation, base int) error {
	if err := snapshotTool(ctx, tx, t.Tenant, t.ID); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE tools SET name = ?, type = ?, spec_url = ?,
		endpoint_url = ?, auth = ?, policy_class = ?, side_effects = ?, idempotency_support = ?,
		spec_sha256 = ?, revision = ?, operation_count = ?, base_url = ?, spec_token_url = ?,
		indexed_at = ?, created_at = ?, updated_at = ?, limits = ?
		WHERE id = ? AND tenant = ? AND (? < 0 OR revision = ?)`, append(row[2:], t.ID, t.Tenant, base, base)...)
	if isUnique(err) {
		return problem.New(problem.Conflict, "a tool named %q already exists", t.Name)
	}
	if err != nil {
		return fmt.Errorf("update tool: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil && base >= 0 {
			if err := toolExists(ctx, tx, t.Tenant, t.ID); err != nil {
				return err
			}
			return problem.New(problem.Conflict, "tool %s changed since its revision %d: refresh again", t.ID, base)
		}
		return errors.Join(err, toolNotFound(t.ID))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM tool_operations WHERE tool_id = ?`, t.ID); err != nil {
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
	return db.write(ctx, func(tx dbtx) error {
		var name string
		err := tx.QueryRowContext(ctx, `SELECT name FROM tools WHERE tenant = ? AND id = ?`, tenant, id).Scan(&name)
		if err == sql.ErrNoRows {
			return toolNotFound(id)
		}
		if err != nil {
			return fmt.Errorf("load tool: %w", err)
		}
		var agent, version string
		err = tx.QueryRowContext(ctx, `SELECT agent, version FROM agent_version_tools
			WHERE tenant = ? AND tool_name = ? ORDER BY agent, version LIMIT 1`, tenant, name).Scan(&agent, &version)
		if err == nil {
			return problem.New(problem.Conflict, "tool %q is used by agent %q version %q: archive that version first (DELETE /v1/agents/%s@%s)", name, agent, version, agent, version)
		}
		if err != sql.ErrNoRows {
			return fmt.Errorf("check tool use: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tool_operations WHERE tool_id = ?`, id); err != nil {
			return fmt.Errorf("delete operations: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tool_snapshots WHERE tenant = ? AND id = ?`, tenant, id); err != nil {
			return fmt.Errorf("delete snapshots: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tool_refreshes WHERE tenant = ? AND tool_id = ?`, tenant, id); err != nil {
			return fmt.Errorf("delete refreshes: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tools WHERE tenant = ? AND id = ?`, tenant, id); err != nil {
			return fmt.Errorf("delete tool: %w", err)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Tool returns a tool by id, or problem.NotFound.
func (db *DB) Tool(ctx context.Context, tenant, id string) (*tool.Tool, error) {
	var t *tool.Tool
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		t, err = sqlrow.ScanTool(tx.QueryRowContext(ctx, `SELECT `+sqlrow.ToolColumns+` FROM tools WHERE tenant = ? AND id = ?`, tenant, id))
		if err == sql.ErrNoRows {
			return toolNotFound(id)
		}
		return err
	})
	return t, err
}

// ToolByName returns a tool by name, or problem.NotFound.
func (db *DB) ToolByName(ctx context.Context, tenant, name string) (*tool.Tool, error) {
	var t *tool.Tool
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		t, err = sqlrow.ScanTool(tx.QueryRowContext(ctx, `SELECT `+sqlrow.ToolColumns+` FROM tools WHERE tenant = ? AND name = ?`, tenant, name))
		if err == sql.ErrNoRows {
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
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.ToolColumns+` FROM tools
			WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?`, tenant, opt.After, limit)
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			t, err := sqlrow.ScanTool(rows)
			if err != nil {
				return err
			}
			ts = append(ts, t)
		}
		return rows.Err()
	})
	return ts, err
}

// Operations returns a tool's operations ordered by id, those whose id,
// summary or description contain q (case-insensitively) when q is not "".
func (db *DB) Operations(ctx context.Context, tenant, toolID, q string) ([]tool.Operation, error) {
	var ops []tool.Operation
	err := db.read(ctx, func(tx dbtx) error {
		if err := toolExists(ctx, tx, tenant, toolID); err != nil {
			return err
		}
		pat := likePattern(q)
		rows, err := tx.QueryContext(ctx, `SELECT data FROM tool_operations
			WHERE tenant = ? AND tool_id = ?
			  AND (? = '' OR lower(op_id) LIKE ? ESCAPE '\' OR lower(summary) LIKE ? ESCAPE '\'
			       OR lower(description) LIKE ? ESCAPE '\')
			ORDER BY op_id`, tenant, toolID, q, pat, pat, pat)
		if err != nil {
			return fmt.Errorf("query operations: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			op, err := sqlrow.ScanOperation(rows)
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
		return rows.Err()
	})
	return ops, err
}

// Operation returns one operation, or problem.NotFound.
func (db *DB) Operation(ctx context.Context, tenant, toolID, opID string) (*tool.Operation, error) {
	var op tool.Operation
	err := db.query(ctx, func(tx dbtx) error {
		// One statement: no row means no tool, a NULL no operation.
		var data sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT (SELECT data FROM tool_operations
			WHERE tenant = t.tenant AND tool_id = t.id AND op_id = ?) FROM tools t WHERE t.tenant = ? AND t.id = ?`,
			opID, tenant, toolID).Scan(&data)
		if err == sql.ErrNoRows {
			return toolNotFound(toolID)
		}
		if err != nil {
			return fmt.Errorf("load operation: %w", err)
		}
		if !data.Valid {
			return problem.New(problem.NotFound, "tool %s has no operation %q", toolID, opID)
		}
		if err := json.Unmarshal([]byte(data.String), &op); err != nil {
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
	err := db.query(ctx, func(tx dbtx) error {
		var data []byte
		var err error
		t, err = sqlrow.ScanTool(sqlrow.With(tx.QueryRowContext(ctx, `SELECT `+sqlrow.ToolColumns+`, operations FROM tool_snapshots
			WHERE tenant = ? AND name = ? AND revision = ? ORDER BY updated_at DESC LIMIT 1`, tenant, name, revision), &data))
		if err == sql.ErrNoRows {
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
func snapshotTool(ctx context.Context, tx dbtx, tenant, id string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO tool_snapshots (`+sqlrow.ToolColumns+`, operations)
		SELECT `+sqlrow.ToolColumns+`, (SELECT json_group_array(json(data)) FROM
			(SELECT data FROM tool_operations WHERE tool_id = t.id ORDER BY op_id))
		FROM tools t WHERE t.tenant = ? AND t.id = ?
		ON CONFLICT DO NOTHING`, tenant, id); err != nil {
		return fmt.Errorf("snapshot tool: %w", err)
	}
	// Tool names are [a-zA-Z0-9_-]: quoted, each is a JSON path key as it is.
	if _, err := tx.ExecContext(ctx, `DELETE FROM tool_snapshots AS s
		WHERE s.tenant = ? AND s.id = ? AND s.revision < (SELECT revision FROM tools WHERE tenant = ? AND id = ?)
		  AND NOT EXISTS (SELECT 1 FROM workflows w WHERE w.tenant = s.tenant AND w.status IN ('running', 'waiting')
			AND json_extract(w.tool_revisions, '$."' || s.name || '"') = s.revision)`,
		tenant, id, tenant, id); err != nil {
		return fmt.Errorf("drop tool snapshots: %w", err)
	}
	return nil
}

func toolNotFound(id string) error { return problem.New(problem.NotFound, "no tool with id %q", id) }

func toolExists(ctx context.Context, tx dbtx, tenant, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM tools WHERE tenant = ? AND id = ?`, tenant, id).Scan(&one)
	if err == sql.ErrNoRows {
		return toolNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("load tool: %w", err)
	}
	return nil
}

func insertOperations(ctx context.Context, tx dbtx, t *tool.Tool, ops []tool.Operation) error {
	// The writer's statements are prepared once on its connection, so a
	// description's thousands of operations share one.
	for _, op := range ops {
		row, err := sqlrow.OperationValues(t, op)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO tool_operations
			(tenant, tool_id, op_id, kind, summary, description, data) VALUES (?, ?, ?, ?, ?, ?, ?)`, row...)
		if isUnique(err) {
			return problem.Field("spec", "operation id %q appears twice", op.ID)
		}
		if err != nil {
			return fmt.Errorf("insert operation %q: %w", op.ID, err)
		}
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
func scheduleRefresh(ctx context.Context, tx dbtx, t *tool.Tool) error {
	next := ""
	if d := t.RefreshEvery(); d > 0 {
		next = fmtTime(t.UpdatedAt.Add(d))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tools SET refresh_set = ?,
		refresh_next = CASE WHEN ? = '' THEN '' WHEN refresh_set = ? AND refresh_next <> '' THEN refresh_next ELSE ? END
		WHERE tenant = ? AND id = ?`, t.Refresh, next, t.Refresh, next, t.Tenant, t.ID); err != nil {
		return fmt.Errorf("schedule tool refresh: %w", err)
	}
	return nil
}

// DueToolRefreshes returns up to limit tools, of every tenant, whose
// scheduled refresh is due at now, soonest first.
func (db *DB) DueToolRefreshes(ctx context.Context, now time.Time, limit int) ([]*tool.Tool, error) {
	var out []*tool.Tool
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.ToolColumns+`, refresh_next FROM tools
			WHERE refresh_next <> '' AND refresh_next <= ? ORDER BY refresh_next LIMIT ?`, fmtTime(now), limit)
		if err != nil {
			return fmt.Errorf("list due tool refreshes: %w", err)
		}
		out, err = collect(rows, func(s sqlrow.Scanner) (*tool.Tool, error) {
			var due time.Time
			t, err := sqlrow.ScanTool(sqlrow.With(s, sqlrow.Time(&due)))
			if t != nil {
				t.RefreshDue = due
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
	err := db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tools SET refresh_next = ?
			WHERE tenant = ? AND id = ? AND refresh_next = ?`, fmtTime(next), tenant, id, fmtTime(due))
		if err != nil {
			return fmt.Errorf("claim tool refresh: %w", err)
		}
		n, err := res.RowsAffected()
		won = n == 1
		return err
	})
	return won, err
}
