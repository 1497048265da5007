package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/workflow"
)

// ArchiveVersion archives one version of an agent (agent.VersionStore).
func (db *DB) ArchiveVersion(ctx context.Context, tenant, name, version string, rec *audit.Record) error {
	db.prepareAudit(rec)
	now := sqlrow.FormatTime(db.now())
	return db.write(ctx, func(tx dbtx) error {
		var archived, def, agentArchived string
		err := tx.QueryRowContext(ctx, `SELECT v.archived_at, a.default_version, a.archived_at
			FROM agent_versions v JOIN agents a ON a.tenant = v.tenant AND a.name = v.name
			WHERE v.tenant = ? AND v.name = ? AND v.version = ?`, tenant, name, version).Scan(&archived, &def, &agentArchived)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return missingVersion(ctx, tx, tenant, name, version)
		case err != nil:
			return fmt.Errorf("load agent version: %w", err)
		case archived != "":
			return appendAudit(ctx, tx, rec)
		case def == version && agentArchived == "":
			return agent.DefaultRefusal(name, version)
		}
		ref := name + "@" + version
		if err := archiveBlockers(ctx, tx, tenant, name, version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agent_versions SET archived_at = ?
			WHERE tenant = ? AND name = ? AND version = ?`, now, tenant, name, version); err != nil {
			return fmt.Errorf("archive %s: %w", ref, err)
		}
		if err := releaseReferences(ctx, tx, tenant, name, version); err != nil {
			return err
		}
		return appendAudit(ctx, tx, rec)
	})
}

// ArchiveAgent archives every version of an agent and the agent itself
// (agent.VersionStore).
func (db *DB) ArchiveAgent(ctx context.Context, tenant, name string, rec *audit.Record) (int, error) {
	db.prepareAudit(rec)
	now := sqlrow.FormatTime(db.now())
	var n int64
	err := db.write(ctx, func(tx dbtx) error {
		n = 0
		var archived string
		err := tx.QueryRowContext(ctx, `SELECT archived_at FROM agents WHERE tenant = ? AND name = ?`,
			tenant, name).Scan(&archived)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return agentNotFound(name)
		case err != nil:
			return fmt.Errorf("load agent: %w", err)
		}
		if err := archiveBlockers(ctx, tx, tenant, name, ""); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE agent_versions SET archived_at = ?
			WHERE tenant = ? AND name = ? AND archived_at = ''`, now, tenant, name)
		if err != nil {
			return fmt.Errorf("archive agent %q: %w", name, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("archive agent %q: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET archived_at = ?
			WHERE tenant = ? AND name = ? AND archived_at = ''`, now, tenant, name); err != nil {
			return fmt.Errorf("archive agent %q: %w", name, err)
		}
		if err := releaseReferences(ctx, tx, tenant, name, ""); err != nil {
			return err
		}
		if rec != nil {
			rec.Details = audit.AddDetail(rec.Details, "versions_archived", n)
		}
		return appendAudit(ctx, tx, rec)
	})
	return int(n), err
}

// archiveBlockers refuses archiving a version ("" = every version of the
// agent) while a workflow of it is running or waiting, or a schedule
// invokes it.
func archiveBlockers(ctx context.Context, tx dbtx, tenant, name, version string) error {
	ref := name
	if version != "" {
		ref = name + "@" + version
	}
	var id, status string
	err := tx.QueryRowContext(ctx, `SELECT id, status FROM workflows
		WHERE tenant = ? AND status IN (?, ?) AND agent = ? AND (? = '' OR agent_version = ?)
		ORDER BY id LIMIT 1`, tenant, workflow.Running, workflow.Waiting, name, version, version).Scan(&id, &status)
	switch {
	case err == nil:
		return agent.RunningRefusal(ref, id, status)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("find running workflows of %s: %w", ref, err)
	}
	var target string
	err = tx.QueryRowContext(ctx, `SELECT id, agent FROM schedules
		WHERE tenant = ? AND (agent = ? OR (? = '' AND substr(agent, 1, length(?)) = ?))
		ORDER BY id LIMIT 1`, tenant, ref, version, name+"@", name+"@").Scan(&id, &target)
	switch {
	case err == nil:
		return agent.ScheduleRefusal(ref, id, target)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("find schedules of %s: %w", ref, err)
	}
	return nil
}

// releaseReferences drops the tool and model references of a version (""
// = every version of the agent), so they no longer hold them.
func releaseReferences(ctx context.Context, tx dbtx, tenant, name, version string) error {
	for _, q := range []string{
		`DELETE FROM agent_version_tools WHERE tenant = ? AND agent = ? AND (? = '' OR version = ?)`,
		`DELETE FROM agent_version_models WHERE tenant = ? AND agent = ? AND (? = '' OR version = ?)`,
	} {
		if _, err := tx.ExecContext(ctx, q, tenant, name, version, version); err != nil {
			return fmt.Errorf("release the tools and models of %s: %w", name, err)
		}
	}
	return nil
}

// missingLiveVersion explains why a version cannot become the default: it
// does not exist, or it is archived.
func missingLiveVersion(ctx context.Context, tx dbtx, tenant, name, version string) error {
	var archived string
	err := tx.QueryRowContext(ctx, `SELECT archived_at FROM agent_versions WHERE tenant = ? AND name = ? AND version = ?`,
		tenant, name, version).Scan(&archived)
	if err == nil && archived != "" {
		return problem.New(problem.AgentVersionArchived,
			"%s@%s is archived and cannot become the default: deploy a new version (POST /v1/agents)", name, version)
	}
	return missingVersion(ctx, tx, tenant, name, version)
}
