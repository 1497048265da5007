package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

var _ agent.VersionStore = (*DB)(nil)

// agentQuery selects agent summaries: the latest version is the one with the
// highest seq. The caller appends the rest of the WHERE clause.
const agentQuery = `SELECT a.name, a.default_version, a.created_at, a.updated_at,
		(SELECT count(*) FROM agent_versions c WHERE c.tenant = a.tenant AND c.name = a.name),
		l.version, l.description, a.archived_at
	FROM agents a JOIN agent_versions l ON l.tenant = a.tenant AND l.name = a.name
		AND l.seq = (SELECT max(seq) FROM agent_versions m WHERE m.tenant = a.tenant AND m.name = a.name)
	WHERE a.tenant = $1 AND `

// versionQuery selects versions with whether each is its agent's default.
const versionQuery = `SELECT v.version, v.description, v.definition, v.external, v.tools, v.deployed_at,
		v.version = a.default_version, v.archived_at
	FROM agent_versions v JOIN agents a ON a.tenant = v.tenant AND a.name = v.name
	WHERE v.tenant = $1 AND v.name = $2 `

// DeployVersion stores v, creating its agent on the first version, and sets
// v.Version (when it was "") and v.Default. The agent's row is locked for
// the transaction, so concurrent deploys of one agent number their versions
// one after another.
func (db *DB) DeployVersion(ctx context.Context, v *agent.Version, promote bool, rec *audit.Record) error {
	if v.DeployedAt.IsZero() {
		v.DeployedAt = db.now()
	}
	v.DeployedAt = micro(v.DeployedAt)
	tools := v.Tools
	if tools == nil {
		tools = []string{}
	}
	toolsJSON, err := json.Marshal(tools)
	if err != nil {
		return fmt.Errorf("encode agent tools: %w", err)
	}
	external, err := sqlrow.EncodeExternal(v.External)
	if err != nil {
		return err
	}
	db.prepareAudit(rec)
	var version string
	var isDefault bool
	err = db.write(ctx, func(tx *wtx) error {
		version = v.Version
		var (
			def      string
			archived *time.Time
			top      *string
			seq      int
		)
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO agents (tenant, name, default_version, created_at, updated_at)
			VALUES ($1, $2, '', $3, $3) ON CONFLICT (tenant, name) DO NOTHING`, v.Tenant, v.Name, v.DeployedAt)
		b.Queue(`SELECT default_version, archived_at FROM agents WHERE tenant = $1 AND name = $2 FOR UPDATE`, v.Tenant, v.Name).
			QueryRow(func(row pgx.Row) error { return row.Scan(&def, &archived) })
		b.Queue(`SELECT
				(SELECT version FROM agent_versions WHERE tenant = $1 AND name = $2 AND version ~ '^[0-9]+$'
				 ORDER BY length(ltrim(version, '0')) DESC, ltrim(version, '0') DESC LIMIT 1),
				(SELECT coalesce(max(seq), 0) + 1 FROM agent_versions WHERE tenant = $1 AND name = $2)`,
			v.Tenant, v.Name).QueryRow(func(row pgx.Row) error { return row.Scan(&top, &seq) })
		// Checked when the version was compiled, but DeleteTool may have
		// run since: the tools are locked until this version names them.
		var found int
		b.Queue(`SELECT count(*) FROM (SELECT 1 FROM tools WHERE tenant = $1 AND name = ANY($2) FOR SHARE) t`,
			v.Tenant, tools).QueryRow(func(row pgx.Row) error { return row.Scan(&found) })
		if len(v.Models) > 0 {
			// DeleteModel locks the model's row: it waits for this version.
			b.Queue(`SELECT 1 FROM models WHERE tenant = $1 AND name = ANY($2) FOR SHARE`, v.Tenant, v.Models)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("lock agent: %w", err)
		}
		if found != len(slices.Compact(slices.Sorted(slices.Values(tools)))) {
			return toolDeleted("")
		}
		if version == "" {
			version = "1"
			if top != nil {
				version = incDecimal(*top)
			}
		}
		// A deployment revives an archived agent with this version as
		// its default.
		isDefault = promote || def == "" || archived != nil

		b = &pgx.Batch{}
		b.Queue(`INSERT INTO agent_versions (tenant, name, version, seq, description, definition, external, tools,
				deployed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			v.Tenant, v.Name, version, seq, v.Description, nullJSON(v.Definition), external, string(toolsJSON), v.DeployedAt)
		b.Queue(`UPDATE agents SET default_version = CASE WHEN $3 THEN $4 ELSE default_version END, updated_at = $5,
				archived_at = NULL
			WHERE tenant = $1 AND name = $2`, v.Tenant, v.Name, isDefault, version, v.DeployedAt)
		if len(tools) > 0 {
			b.Queue(`INSERT INTO agent_version_tools (tenant, agent, version, tool_name)
				SELECT $1, $2, $3, unnest($4::text[]) ON CONFLICT DO NOTHING`, v.Tenant, v.Name, version, tools)
		}
		if len(v.Models) > 0 {
			b.Queue(`INSERT INTO agent_version_models (tenant, agent, version, model)
				SELECT $1, $2, $3, unnest($4::text[]) ON CONFLICT DO NOTHING`, v.Tenant, v.Name, version, v.Models)
		}
		err := tx.SendBatch(ctx, b).Close()
		if isUnique(err) {
			return problem.New(problem.Conflict, "agent %q already has a version %q", v.Name, version)
		}
		if err != nil {
			return fmt.Errorf("insert agent version: %w", err)
		}
		tx.Audit(rec)
		return nil
	})
	if err != nil {
		return err
	}
	v.Version, v.Default = version, isDefault
	return nil
}

// incDecimal adds one to a string of decimal digits of any length.
func incDecimal(s string) string {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return "1"
	}
	return n.Add(n, big.NewInt(1)).String()
}

// SetDefault makes an existing version the agent's default.
func (db *DB) SetDefault(ctx context.Context, tenant, name, version string, rec *audit.Record) error {
	db.prepareAudit(rec)
	now := micro(db.now())
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE agents SET default_version = $3, updated_at = $4
			WHERE tenant = $1 AND name = $2
			  AND EXISTS (SELECT 1 FROM agent_versions WHERE tenant = $1 AND name = $2 AND version = $3 AND archived_at IS NULL)`,
			tenant, name, version, now)
		if err != nil {
			return fmt.Errorf("set default version: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return missingLiveVersion(ctx, tx, tenant, name, version)
		}
		tx.Audit(rec)
		return nil
	})
}

// Agent returns an agent's summary, or problem.NotFound.
func (db *DB) Agent(ctx context.Context, tenant, name string) (*agent.Agent, error) {
	var a *agent.Agent
	err := db.read(ctx, func(tx querier) error {
		var err error
		a, err = sqlrow.ScanAgent(tx.QueryRow(ctx, agentQuery+`a.name = $2`, tenant, name), tenant)
		return sqlrow.NotFound(err, "no agent named %q", name)
	})
	return a, err
}

// AgentVersion returns one version of an agent ("" = its default).
func (db *DB) AgentVersion(ctx context.Context, tenant, name, version string) (*agent.Version, error) {
	var v *agent.Version
	err := db.read(ctx, func(tx querier) error {
		var err error
		v, err = sqlrow.ScanVersion(tx.QueryRow(ctx, versionQuery+`
			AND v.version = CASE WHEN $3::text = '' THEN a.default_version ELSE $3::text END`,
			tenant, name, version), tenant, name)
		if sqlrow.IsNoRows(err) {
			return missingVersion(ctx, tx, tenant, name, version)
		}
		return err
	})
	return v, err
}

// ListAgents returns the live agents ordered by name, after the given name.
func (db *DB) ListAgents(ctx context.Context, tenant, after string, limit int) ([]*agent.Agent, error) {
	return db.listAgents(ctx, tenant, after, limit, `a.archived_at IS NULL AND `)
}

// ListAllAgents returns agents, archived ones too, ordered by name, after
// the given name.
func (db *DB) ListAllAgents(ctx context.Context, tenant, after string, limit int) ([]*agent.Agent, error) {
	return db.listAgents(ctx, tenant, after, limit, "")
}

func (db *DB) listAgents(ctx context.Context, tenant, after string, limit int, live string) ([]*agent.Agent, error) {
	limit = page.Size(limit)
	var as []*agent.Agent
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, agentQuery+live+`a.name > $2 ORDER BY a.name LIMIT $3`, tenant, after, limit)
		if err != nil {
			return fmt.Errorf("list agents: %w", err)
		}
		as, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*agent.Agent, error) { return sqlrow.ScanAgent(row, tenant) })
		if err != nil {
			return fmt.Errorf("list agents: %w", err)
		}
		return nil
	})
	return as, err
}

// ListVersions returns an agent's versions, newest first, or problem.NotFound.
func (db *DB) ListVersions(ctx context.Context, tenant, name string) ([]*agent.Version, error) {
	var vs []*agent.Version
	err := db.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, versionQuery+`ORDER BY v.seq DESC`, tenant, name)
		if err != nil {
			return fmt.Errorf("list agent versions: %w", err)
		}
		vs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*agent.Version, error) {
			return sqlrow.ScanVersion(row, tenant, name)
		})
		if err != nil {
			return fmt.Errorf("list agent versions: %w", err)
		}
		if len(vs) == 0 {
			return agentNotFound(name)
		}
		return nil
	})
	return vs, err
}

// missingVersion explains why a version was not found: the agent does not
// exist (problem.NotFound) or has no such version.
func missingVersion(ctx context.Context, tx querier, tenant, name, version string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM agents WHERE tenant = $1 AND name = $2`, tenant, name).Scan(&one)
	switch {
	case sqlrow.IsNoRows(err):
		return agentNotFound(name)
	case err != nil:
		return fmt.Errorf("load agent: %w", err)
	case version == "":
		return problem.New(problem.AgentVersionNotFound, "agent %q has no default version", name)
	}
	return problem.New(problem.AgentVersionNotFound, "agent %q has no version %q", name, version)
}

func agentNotFound(name string) error {
	return problem.New(problem.NotFound, "no agent named %q", name)
}
