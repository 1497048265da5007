package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

var _ model.Store = (*DB)(nil)

// CreateModel stores m; problem.Conflict when its name is taken.
func (db *DB) CreateModel(ctx context.Context, m *model.Model, rec *audit.Record) error {
	row, err := sqlrow.ModelValues(m, sqlrow.Timestamp)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(ctx, `INSERT INTO models (`+sqlrow.ModelColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`, row...)
		if isUnique(err) {
			return model.NameTaken(m.Name)
		}
		if err != nil {
			return fmt.Errorf("insert model: %w", err)
		}
		tx.Audit(rec)
		return nil
	})
}

// UpdateModel replaces the model of m's tenant and id at revision m.Revision-1.
func (db *DB) UpdateModel(ctx context.Context, m *model.Model, rec *audit.Record) error {
	row, err := sqlrow.ModelValues(m, sqlrow.Timestamp)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE models SET name = $3, provider = $4, base_url = $5, model = $6,
			auth = $7, headers = $8, timeout_ns = $9, max_concurrency = $10, price = $11,
			daily_token_budget = $12, revision = $13, created_at = $14, updated_at = $15,
			http2_prior_knowledge = $16
			WHERE id = $1 AND tenant = $2 AND revision = $13 - 1`, row...)
		if isUnique(err) {
			return model.NameTaken(m.Name)
		}
		if err != nil {
			return fmt.Errorf("update model: %w", err)
		}
		if tag.RowsAffected() == 0 {
			var one int
			if tx.QueryRow(ctx, `SELECT 1 FROM models WHERE id = $1 AND tenant = $2`, m.ID, m.Tenant).Scan(&one) == nil {
				return model.ChangedMeanwhile(m.Name)
			}
			return model.NotFound(m.Name)
		}
		tx.Audit(rec)
		return nil
	})
}

// DeleteModel deletes a model by name; problem.Conflict while an agent
// version names it. The model's row is locked first, so a deploy naming it
// (which locks it for share) either finishes before or finds it gone.
func (db *DB) DeleteModel(ctx context.Context, tenant, name string, rec *audit.Record) error {
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM models WHERE tenant = $1 AND name = $2 FOR UPDATE`, tenant, name).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return model.NotFound(name)
		}
		if err != nil {
			return fmt.Errorf("load model: %w", err)
		}
		var agent, version string
		err = tx.QueryRow(ctx, `SELECT agent, version FROM agent_version_models
			WHERE tenant = $1 AND model = $2 ORDER BY agent, version LIMIT 1`, tenant, name).Scan(&agent, &version)
		if err == nil {
			return problem.New(problem.Conflict, "model %q is used by agent %q version %q: archive that version first (DELETE /v1/agents/%s@%s)", name, agent, version, agent, version)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("check model use: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM models WHERE tenant = $1 AND id = $2`, tenant, id); err != nil {
			return fmt.Errorf("delete model: %w", err)
		}
		tx.Audit(rec)
		return nil
	})
}

// ModelByName returns a model, or problem.NotFound.
func (db *DB) ModelByName(ctx context.Context, tenant, name string) (*model.Model, error) {
	var m *model.Model
	err := db.read(ctx, func(tx querier) error {
		var err error
		m, err = sqlrow.ScanModel(tx.QueryRow(ctx, `SELECT `+sqlrow.ModelColumns+` FROM models WHERE tenant = $1 AND name = $2`, tenant, name))
		if errors.Is(err, pgx.ErrNoRows) {
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
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT `+sqlrow.ModelColumns+` FROM models
			WHERE tenant = $1 AND name > $2 ORDER BY name COLLATE "C" LIMIT $3`, tenant, opt.After, limit)
		if err != nil {
			return fmt.Errorf("list models: %w", err)
		}
		ms, err = collect(rows, sqlrow.ScanModel)
		if err != nil {
			return fmt.Errorf("list models: %w", err)
		}
		return nil
	})
	return ms, err
}
