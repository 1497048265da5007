package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

var _ model.Store = (*DB)(nil)

// CreateModel stores m; problem.Conflict when its name is taken.
func (db *DB) CreateModel(ctx context.Context, m *model.Model, rec *audit.Record) error {
	row, err := sqlrow.ModelValues(m, sqlrow.FormatTime)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO models (`+sqlrow.ModelColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, row...)
		if isUnique(err) {
			return model.NameTaken(m.Name)
		}
		if err != nil {
			return fmt.Errorf("insert model: %w", err)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// UpdateModel replaces the model of m's tenant and id at revision m.Revision-1.
func (db *DB) UpdateModel(ctx context.Context, m *model.Model, rec *audit.Record) error {
	row, err := sqlrow.ModelValues(m, sqlrow.FormatTime)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE models SET name = ?, provider = ?, base_url = ?, model = ?,
			auth = ?, headers = ?, timeout_ns = ?, max_concurrency = ?, price = ?, daily_token_budget = ?,
			revision = ?, created_at = ?, updated_at = ?, http2_prior_knowledge = ?
			WHERE id = ? AND tenant = ? AND revision = ?`, append(row[2:], m.ID, m.Tenant, m.Revision-1)...)
		if isUnique(err) {
			return model.NameTaken(m.Name)
		}
		if err != nil {
			return fmt.Errorf("update model: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			var one int
			if tx.QueryRowContext(ctx, `SELECT 1 FROM models WHERE id = ? AND tenant = ?`, m.ID, m.Tenant).Scan(&one) == nil {
				return model.ChangedMeanwhile(m.Name)
			}
			return model.NotFound(m.Name)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// DeleteModel deletes a model by name; problem.Conflict while an agent
// version names it.
func (db *DB) DeleteModel(ctx context.Context, tenant, name string, rec *audit.Record) error {
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		var agent, version string
		err := tx.QueryRowContext(ctx, `SELECT agent, version FROM agent_version_models
			WHERE tenant = ? AND model = ? ORDER BY agent, version LIMIT 1`, tenant, name).Scan(&agent, &version)
		if err == nil {
			return problem.New(problem.Conflict, "model %q is used by agent %q version %q: archive that version first (DELETE /v1/agents/%s@%s)", name, agent, version, agent, version)
		}
		if err != sql.ErrNoRows {
			return fmt.Errorf("check model use: %w", err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM models WHERE tenant = ? AND name = ?`, tenant, name)
		if err != nil {
			return fmt.Errorf("delete model: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return model.NotFound(name)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// ModelByName returns a model, or problem.NotFound.
func (db *DB) ModelByName(ctx context.Context, tenant, name string) (*model.Model, error) {
	var m *model.Model
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		m, err = sqlrow.ScanModel(tx.QueryRowContext(ctx, `SELECT `+sqlrow.ModelColumns+` FROM models WHERE tenant = ? AND name = ?`, tenant, name))
		if err == sql.ErrNoRows {
			return model.NotFound(name)
		}
		return err
	})
	return m, err
}

// ListModels returns models ordered by name, after opt.After.
func (db *DB) ListModels(ctx context.Context, tenant string, opt model.ListOptions) ([]*model.Model, error) {
	limit := page.Size(opt.Limit)
	var ms []*model.Model
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.ModelColumns+` FROM models
			WHERE tenant = ? AND name > ? ORDER BY name LIMIT ?`, tenant, opt.After, limit)
		if err != nil {
			return fmt.Errorf("list models: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			m, err := sqlrow.ScanModel(rows)
			if err != nil {
				return err
			}
			ms = append(ms, m)
		}
		return rows.Err()
	})
	return ms, err
}
