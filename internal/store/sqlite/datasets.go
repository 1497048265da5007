package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

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
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		if next {
			var last int
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM datasets WHERE tenant = ? AND name = ?`,
				d.Tenant, d.Name).Scan(&last); err != nil {
				return fmt.Errorf("read dataset version: %w", err)
			}
			if last == 0 {
				return replay.DatasetNotFound(d.Name, 0)
			}
			d.Version = last + 1
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO datasets (`+sqlrow.DatasetColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, d.Tenant, d.Name, d.Version, d.Description, string(d.Filter), len(d.WorkflowIDs), creator, sqlrow.FormatTime(d.CreatedAt))
		if isUnique(err) {
			if next {
				return problem.New(problem.Conflict, "dataset %s got version %d at the same time: send the request again", d.Name, d.Version)
			}
			return problem.New(problem.Conflict, "dataset %s exists already: make its next version with PUT /v1/datasets/%s", d.Name, d.Name)
		}
		if err != nil {
			return fmt.Errorf("insert dataset: %w", err)
		}
		const chunk = 500
		for start := 0; start < len(d.WorkflowIDs); start += chunk {
			part := d.WorkflowIDs[start:min(start+chunk, len(d.WorkflowIDs))]
			args := make([]any, 0, 4*len(part))
			for i, id := range part {
				var e any
				if expected[start+i] != "" {
					e = expected[start+i]
				}
				args = append(args, d.ID, start+i, id, e)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO dataset_items (dataset_id, position, workflow_id, expected) VALUES (?, ?, ?, ?)`+
				strings.Repeat(`, (?, ?, ?, ?)`, len(part)-1), args...); err != nil {
				return fmt.Errorf("insert dataset items: %w", err)
			}
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Dataset returns a version of a dataset (the latest for 0) with its items.
func (db *DB) Dataset(ctx context.Context, tenant, name string, version int) (*replay.Dataset, error) {
	var d *replay.Dataset
	err := db.query(ctx, func(tx dbtx) error {
		q, args := `SELECT `+sqlrow.DatasetColumns+` FROM datasets WHERE tenant = ? AND name = ? AND version = ?`, []any{tenant, name, version}
		if version == 0 {
			q, args = `SELECT `+sqlrow.DatasetColumns+` FROM datasets WHERE tenant = ? AND name = ? ORDER BY version DESC LIMIT 1`, args[:2]
		}
		var err error
		if d, err = sqlrow.ScanDataset(tx.QueryRowContext(ctx, q, args...)); err == sql.ErrNoRows {
			return replay.DatasetNotFound(name, version)
		} else if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT workflow_id, coalesce(expected, '') FROM dataset_items WHERE dataset_id = ? ORDER BY position`, d.ID)
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
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sqlrow.DatasetColumns+` FROM datasets d
			WHERE tenant = ? AND name > ? AND version = (SELECT max(version) FROM datasets WHERE tenant = d.tenant AND name = d.name)
			ORDER BY name LIMIT ?`, tenant, f.After, page.Size(f.Limit))
		if err != nil {
			return fmt.Errorf("list datasets: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			d, err := sqlrow.ScanDataset(rows)
			if err != nil {
				return err
			}
			ds = append(ds, d)
		}
		return rows.Err()
	})
	return ds, err
}
