package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
)

var _ model.Store = (*DB)(nil)

const modelColumns = `id, tenant, name, provider, base_url, model, auth, headers, timeout_ns,
	max_concurrency, price, daily_token_budget, revision, created_at, updated_at`

// CreateModel stores m; problem.Conflict when its name is taken.
func (db *DB) CreateModel(ctx context.Context, m *model.Model, rec *audit.Record) error {
	row, err := modelRow(m)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(ctx, `INSERT INTO models (`+modelColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`, row...)
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
	row, err := modelRow(m)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE models SET name = $3, provider = $4, base_url = $5, model = $6,
			auth = $7, headers = $8, timeout_ns = $9, max_concurrency = $10, price = $11,
			daily_token_budget = $12, revision = $13, created_at = $14, updated_at = $15
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
		m, err = scanModel(tx.QueryRow(ctx, `SELECT `+modelColumns+` FROM models WHERE tenant = $1 AND name = $2`, tenant, name))
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
		rows, err := tx.Query(ctx, `SELECT `+modelColumns+` FROM models
			WHERE tenant = $1 AND name > $2 ORDER BY name COLLATE "C" LIMIT $3`, tenant, opt.After, limit)
		if err != nil {
			return fmt.Errorf("list models: %w", err)
		}
		ms, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*model.Model, error) { return scanModel(row) })
		if err != nil {
			return fmt.Errorf("list models: %w", err)
		}
		return nil
	})
	return ms, err
}

// modelRow is m's values in modelColumns order.
func modelRow(m *model.Model) ([]any, error) {
	auth, headers, price, err := model.EncodeColumns(m)
	if err != nil {
		return nil, err
	}
	return []any{m.ID, m.Tenant, m.Name, m.Provider, m.BaseURL, m.Model, string(auth), string(headers),
		int64(m.Timeout), m.MaxConcurrency, string(price), m.DailyTokenBudget, m.Revision,
		m.CreatedAt, m.UpdatedAt}, nil
}

func scanModel(row pgx.Row) (*model.Model, error) {
	var (
		m                 model.Model
		auth, hdrs, price []byte
		timeout           int64
	)
	err := row.Scan(&m.ID, &m.Tenant, &m.Name, &m.Provider, &m.BaseURL, &m.Model, &auth, &hdrs, &timeout,
		&m.MaxConcurrency, &price, &m.DailyTokenBudget, &m.Revision, &m.CreatedAt, &m.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan model: %w", err)
	}
	m.Timeout = time.Duration(timeout)
	if err := model.DecodeColumns(&m, auth, hdrs, price); err != nil {
		return nil, err
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return &m, nil
}
