package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"

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
	WHERE a.tenant = ? AND `

// versionQuery selects versions with whether each is its agent's default.
const versionQuery = `SELECT v.version, v.description, v.definition, v.external, v.tools, v.deployed_at,
		v.version = a.default_version, v.archived_at
	FROM agent_versions v JOIN agents a ON a.tenant = v.tenant AND a.name = v.name
	WHERE v.tenant = ? AND v.name = ? `

// DeployVersion stores v, creating its agent on the first version, and sets
// v.Version (when it was "") and v.Default.
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
	err = db.write(ctx, func(tx dbtx) error {
		version, isDefault = v.Version, promote
		var def, archived string
		err := tx.QueryRowContext(ctx, `SELECT default_version, archived_at FROM agents WHERE tenant = ? AND name = ?`,
			v.Tenant, v.Name).Scan(&def, &archived)
		first := sqlrow.IsNoRows(err)
		if err != nil && !first {
			return fmt.Errorf("load agent: %w", err)
		}
		if version == "" {
			if version, err = nextVersion(ctx, tx, v.Tenant, v.Name); err != nil {
				return err
			}
		}
		deployed := sqlrow.FormatTime(v.DeployedAt)
		_, err = tx.ExecContext(ctx, `INSERT INTO agent_versions
			(tenant, name, version, seq, description, definition, external, tools, deployed_at)
			VALUES (?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM agent_versions WHERE tenant = ? AND name = ?),
				?, ?, ?, ?, ?)`,
			v.Tenant, v.Name, version, v.Tenant, v.Name, v.Description, string(v.Definition), external, string(toolsJSON), deployed)
		if isUnique(err) {
			return problem.New(problem.Conflict, "agent %q already has a version %q", v.Name, version)
		}
		if err != nil {
			return fmt.Errorf("insert agent version: %w", err)
		}
		switch {
		case first:
			isDefault = true
			_, err = tx.ExecContext(ctx, `INSERT INTO agents (tenant, name, default_version, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?)`, v.Tenant, v.Name, version, deployed, deployed)
		case promote, archived != "":
			// A deployment revives an archived agent with this version
			// as its default.
			isDefault = true
			_, err = tx.ExecContext(ctx, `UPDATE agents SET default_version = ?, updated_at = ?, archived_at = ''
				WHERE tenant = ? AND name = ?`, version, deployed, v.Tenant, v.Name)
		default:
			_, err = tx.ExecContext(ctx, `UPDATE agents SET updated_at = ? WHERE tenant = ? AND name = ?`,
				deployed, v.Tenant, v.Name)
		}
		if err != nil {
			return fmt.Errorf("store agent: %w", err)
		}
		for i, name := range tools {
			// Checked when the version was compiled, but DeleteTool may
			// have run since.
			res, err := tx.ExecContext(ctx, `INSERT INTO agent_version_tools (tenant, agent, version, tool_name)
				SELECT ?, ?, ?, name FROM tools WHERE tenant = ? AND name = ? ON CONFLICT DO NOTHING`,
				v.Tenant, v.Name, version, v.Tenant, name)
			if err != nil {
				return fmt.Errorf("record agent tool: %w", err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 0 && !slices.Contains(tools[:i], name) {
				return toolDeleted(name)
			}
		}
		for _, name := range v.Models {
			if _, err := tx.ExecContext(ctx, `INSERT INTO agent_version_models (tenant, agent, version, model)
				VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, v.Tenant, v.Name, version, name); err != nil {
				return fmt.Errorf("record agent model: %w", err)
			}
		}
		return appendAudit(ctx, tx, rec)
	})
	if err != nil {
		return err
	}
	v.Version, v.Default = version, isDefault
	return nil
}

// nextVersion is one above the agent's highest all-digit version, "1" for
// the first.
func nextVersion(ctx context.Context, tx dbtx, tenant, name string) (string, error) {
	var top string
	err := tx.QueryRowContext(ctx, `SELECT version FROM agent_versions
		WHERE tenant = ? AND name = ? AND version NOT GLOB '*[^0-9]*'
		ORDER BY length(ltrim(version, '0')) DESC, ltrim(version, '0') DESC LIMIT 1`, tenant, name).Scan(&top)
	if sqlrow.IsNoRows(err) {
		return "1", nil
	}
	if err != nil {
		return "", fmt.Errorf("find latest integer version: %w", err)
	}
	return incDecimal(top), nil
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
	now := sqlrow.FormatTime(db.now())
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE agents SET default_version = ?, updated_at = ?
			WHERE tenant = ? AND name = ?
			  AND EXISTS (SELECT 1 FROM agent_versions WHERE tenant = ? AND name = ? AND version = ? AND archived_at = '')`,
			version, now, tenant, name, tenant, name, version)
		if err != nil {
			return fmt.Errorf("set default version: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, missingLiveVersion(ctx, tx, tenant, name, version))
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Agent returns an agent's summary, or problem.NotFound.
func (db *DB) Agent(ctx context.Context, tenant, name string) (*agent.Agent, error) {
	var a *agent.Agent
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		a, err = sqlrow.ScanAgent(tx.QueryRowContext(ctx, agentQuery+`a.name = ?`, tenant, name), tenant)
		return sqlrow.NotFound(err, "no agent named %q", name)
	})
	return a, err
}

// AgentVersion returns one version of an agent ("" = its default).
func (db *DB) AgentVersion(ctx context.Context, tenant, name, version string) (*agent.Version, error) {
	var v *agent.Version
	err := db.query(ctx, func(tx dbtx) error {
		var err error
		v, err = sqlrow.ScanVersion(tx.QueryRowContext(ctx, versionQuery+`
			AND v.version = CASE WHEN ? = '' THEN a.default_version ELSE ? END`,
			tenant, name, version, version), tenant, name)
		if sqlrow.IsNoRows(err) {
			return missingVersion(ctx, tx, tenant, name, version)
		}
		return err
	})
	return v, err
}

// ListAgents returns the live agents ordered by name, after the given name.
func (db *DB) ListAgents(ctx context.Context, tenant, after string, limit int) ([]*agent.Agent, error) {
	return db.listAgents(ctx, tenant, after, limit, `a.archived_at = '' AND `)
}

// ListAllAgents returns agents, archived ones too, ordered by name, after
// the given name.
func (db *DB) ListAllAgents(ctx context.Context, tenant, after string, limit int) ([]*agent.Agent, error) {
	return db.listAgents(ctx, tenant, after, limit, "")
}

func (db *DB) listAgents(ctx context.Context, tenant, after string, limit int, live string) ([]*agent.Agent, error) {
	limit = page.Size(limit)
	var as []*agent.Agent
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, agentQuery+live+`a.name > ? ORDER BY a.name LIMIT ?`, tenant, after, limit)
		if err != nil {
			return fmt.Errorf("list agents: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			a, err := sqlrow.ScanAgent(rows, tenant)
			if err != nil {
				return err
			}
			as = append(as, a)
		}
		return rows.Err()
	})
	return as, err
}

// ListVersions returns an agent's versions, newest first, or problem.NotFound.
func (db *DB) ListVersions(ctx context.Context, tenant, name string) ([]*agent.Version, error) {
	var vs []*agent.Version
	err := db.query(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, versionQuery+`ORDER BY v.seq DESC`, tenant, name)
		if err != nil {
			return fmt.Errorf("list agent versions: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			v, err := sqlrow.ScanVersion(rows, tenant, name)
			if err != nil {
				return err
			}
			vs = append(vs, v)
		}
		if err := rows.Err(); err != nil {
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
func missingVersion(ctx context.Context, tx dbtx, tenant, name, version string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM agents WHERE tenant = ? AND name = ?`, tenant, name).Scan(&one)
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
