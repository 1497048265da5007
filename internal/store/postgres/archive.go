package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// ArchiveVersion archives one version of an agent (agent.VersionStore).
// The agent's row is locked, as DeployVersion and SetDefault lock it.
func (db *DB) ArchiveVersion(ctx context.Context, tenant, name, version string, rec *audit.Record) error {
	db.prepareAudit(rec)
	now := micro(db.now())
	return db.write(ctx, func(tx *wtx) error {
		var (
			def                     string
			archived, agentArchived *time.Time
		)
		err := tx.QueryRow(ctx, `SELECT v.archived_at, a.default_version, a.archived_at
			FROM agents a JOIN agent_versions v ON v.tenant = a.tenant AND v.name = a.name
			WHERE a.tenant = $1 AND a.name = $2 AND v.version = $3
			FOR UPDATE OF a`, tenant, name, version).Scan(&archived, &def, &agentArchived)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return missingVersion(ctx, tx, tenant, name, version)
		case err != nil:
			return fmt.Errorf("load agent version: %w", err)
		case archived != nil:
			tx.Audit(rec)
			return nil
		case def == version && agentArchived == nil:
			return agent.DefaultRefusal(name, version)
		}
		if err := archiveBlockers(ctx, tx, tenant, name, version); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_versions SET archived_at = $4
			WHERE tenant = $1 AND name = $2 AND version = $3`, tenant, name, version, now); err != nil {
			return fmt.Errorf("archive %s@%s: %w", name, version, err)
		}
		if err := releaseReferences(ctx, tx, tenant, name, version); err != nil {
			return err
		}
		tx.Audit(rec)
		return nil
	})
}

// ArchiveAgent archives every version of an agent and the agent itself
// (agent.VersionStore).
func (db *DB) ArchiveAgent(ctx context.Context, tenant, name string, rec *audit.Record) (int, error) {
	db.prepareAudit(rec)
	now := micro(db.now())
	var n int64
	err := db.write(ctx, func(tx *wtx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM agents WHERE tenant = $1 AND name = $2 FOR UPDATE`,
			tenant, name).Scan(&one)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return agentNotFound(name)
		case err != nil:
			return fmt.Errorf("load agent: %w", err)
		}
		if err := archiveBlockers(ctx, tx, tenant, name, ""); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE agent_versions SET archived_at = $3
			WHERE tenant = $1 AND name = $2 AND archived_at IS NULL`, tenant, name, now)
		if err != nil {
			return fmt.Errorf("archive agent %q: %w", name, err)
		}
		n = tag.RowsAffected()
		if _, err := tx.Exec(ctx, `UPDATE agents SET archived_at = $3
			WHERE tenant = $1 AND name = $2 AND archived_at IS NULL`, tenant, name, now); err != nil {
			return fmt.Errorf("archive agent %q: %w", name, err)
		}
		if err := releaseReferences(ctx, tx, tenant, name, ""); err != nil {
			return err
		}
		if rec != nil {
			rec.Details = audit.AddDetail(rec.Details, "versions_archived", n)
		}
		tx.Audit(rec)
		return nil
	})
	return int(n), err
}

// archiveBlockers refuses archiving a version ("" = every version of the
// agent) while a workflow of it is running or waiting, or a schedule
// invokes it.
func archiveBlockers(ctx context.Context, tx querier, tenant, name, version string) error {
	ref := name
	if version != "" {
		ref = name + "@" + version
	}
	var id, status string
	err := tx.QueryRow(ctx, `SELECT id, status FROM workflows
		WHERE tenant = $1 AND status IN ($2, $3) AND agent = $4 AND ($5 = '' OR agent_version = $5)
		ORDER BY id LIMIT 1`, tenant, workflow.Running, workflow.Waiting, name, version).Scan(&id, &status)
	switch {
	case err == nil:
		return agent.RunningRefusal(ref, id, status)
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("find running workflows of %s: %w", ref, err)
	}
	var target string
	err = tx.QueryRow(ctx, `SELECT id, agent FROM schedules
		WHERE tenant = $1 AND (agent = $2 OR ($3 = '' AND starts_with(agent, $4)))
		ORDER BY id LIMIT 1`, tenant, ref, version, name+"@").Scan(&id, &target)
	switch {
	case err == nil:
		return agent.ScheduleRefusal(ref, id, target)
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("find schedules of %s: %w", ref, err)
	}
	return nil
}

// releaseReferences drops the tool and model references of a version (""
// = every version of the agent), so they no longer hold them.
func releaseReferences(ctx context.Context, tx querier, tenant, name, version string) error {
	for _, q := range []string{
		`DELETE FROM agent_version_tools WHERE tenant = $1 AND agent = $2 AND ($3 = '' OR version = $3)`,
		`DELETE FROM agent_version_models WHERE tenant = $1 AND agent = $2 AND ($3 = '' OR version = $3)`,
	} {
		if _, err := tx.Exec(ctx, q, tenant, name, version); err != nil {
			return fmt.Errorf("release the tools and models of %s: %w", name, err)
		}
	}
	return nil
}

// missingLiveVersion explains why a version cannot become the default: it
// does not exist, or it is archived.
func missingLiveVersion(ctx context.Context, tx querier, tenant, name, version string) error {
	var archived *time.Time
	err := tx.QueryRow(ctx, `SELECT archived_at FROM agent_versions WHERE tenant = $1 AND name = $2 AND version = $3`,
		tenant, name, version).Scan(&archived)
	if err == nil && archived != nil {
		return problem.New(problem.AgentVersionArchived,
			"%s@%s is archived and cannot become the default: deploy a new version (POST /v1/agents)", name, version)
	}
	return missingVersion(ctx, tx, tenant, name, version)
}
