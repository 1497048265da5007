package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

var _ replay.DatasetStore = (*DB)(nil)

// CreateDataset stores version 1 of a new dataset.
func (db *DB) CreateDataset(ctx context.Context, d *replay.Dataset, rec *audit.Record) error {
	d.Version = 1
	return db.insertDataset(ctx, d, rec, false)
}

// AddDatasetVersion stores the next version of a dataset.
func (db *DB) AddDatasetVersion(ctx context.Context, d *replay.Dataset, rec *audit.Record) error {
	return db.insertDataset(ctx, d, rec, true)
}

func (db *DB) insertDataset(ctx context.Context, d *replay.Dataset, rec *audit.Record, next bool) error {
	d.CreatedAt = micro(d.CreatedAt)
	creator, expected, err := d.Encode()
	if err != nil {
		return err
	}
	positions := make([]int32, len(d.WorkflowIDs))
	for i := range positions {
		positions[i] = int32(i)
	}
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		if next {
			var last int32
			if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM datasets WHERE tenant = $1 AND name = $2`,
				d.Tenant, d.Name).Scan(&last); err != nil {
				return fmt.Errorf("read dataset version: %w", err)
			}
			if last == 0 {
				return replay.DatasetNotFound(d.Name, 0)
			}
			d.Version = int(last) + 1
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO datasets (`+sqlrow.DatasetColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			d.ID, d.Tenant, d.Name, d.Version, d.Description, string(d.Filter), len(d.WorkflowIDs), creator, d.CreatedAt)
		b.Queue(`INSERT INTO dataset_items (dataset_id, position, workflow_id, expected)
			SELECT $1, p, w, NULLIF(e, '') FROM unnest($2::integer[], $3::text[], $4::text[]) AS u(p, w, e)`,
			d.ID, positions, d.WorkflowIDs, expected)
		err := tx.SendBatch(ctx, b).Close()
		if isUnique(err) {
			if next {
				return problem.New(problem.Conflict, "dataset %s got version %d at the same time: send the request again", d.Name, d.Version)
			}
			return problem.New(problem.Conflict, "dataset %s exists already: make its next version with PUT /v1/datasets/%s", d.Name, d.Name)
		}
		if err != nil {
			return fmt.Errorf("insert dataset: %w", err)
		}
		tx.Audit(rec)
		return nil
	})
}

// Dataset returns a version of a dataset (the latest for 0) with its items.
func (db *DB) Dataset(ctx context.Context, tenant, name string, version int) (*replay.Dataset, error) {
	var d *replay.Dataset
	err := db.read(ctx, func(q querier) error {
		var err error
		d, err = sqlrow.ScanDataset(q.QueryRow(ctx, `SELECT `+sqlrow.DatasetColumns+` FROM datasets
			WHERE tenant = $1 AND name = $2 AND ($3 = 0 OR version = $3) ORDER BY version DESC LIMIT 1`, tenant, name, version))
		if errors.Is(err, pgx.ErrNoRows) {
			return replay.DatasetNotFound(name, version)
		} else if err != nil {
			return err
		}
		rows, err := q.Query(ctx, `SELECT workflow_id, coalesce(expected, '') FROM dataset_items WHERE dataset_id = $1 ORDER BY position`, d.ID)
		if err != nil {
			return fmt.Errorf("read dataset items: %w", err)
		}
		defer rows.Close()
		d.WorkflowIDs = make([]string, 0, d.WorkflowCount)
		for rows.Next() {
			var id, expected string
			if err := rows.Scan(&id, &expected); err != nil {
				return fmt.Errorf("read dataset items: %w", err)
			}
			if err := d.AddItem(id, expected); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return d, err
}

// ListDatasets returns the latest version of each dataset, by name.
func (db *DB) ListDatasets(ctx context.Context, tenant string, f replay.DatasetListFilter) ([]*replay.Dataset, error) {
	var ds []*replay.Dataset
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT DISTINCT ON (name) `+sqlrow.DatasetColumns+` FROM datasets
			WHERE tenant = $1 AND name > $2 ORDER BY name, version DESC LIMIT $3`, tenant, f.After, page.Size(f.Limit))
		if err != nil {
			return fmt.Errorf("list datasets: %w", err)
		}
		ds, err = collect(rows, sqlrow.ScanDataset)
		if err != nil {
			return fmt.Errorf("list datasets: %w", err)
		}
		return nil
	})
	return ds, err
}
