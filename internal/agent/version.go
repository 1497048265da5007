package agent

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

var (
	// NameRE is the rule for agent names (SPEC §1).
	NameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// VersionRE is the rule for agent versions.
	VersionRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,31}$`)
)

// Version is one immutable deployed version of an agent.
type Version struct {
	Tenant      string `json:"-"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	// Definition is a defined version's definition; External, an external
	// version's block (exactly one of them is set).
	Definition json.RawMessage `json:"definition,omitempty"`
	External   *External       `json:"external,omitempty"`
	// Tools are the tool names the definition uses.
	Tools []string `json:"tools"`
	// Models are the model names the definition uses.
	Models     []string  `json:"models,omitempty"`
	DeployedAt time.Time `json:"deployed_at"`
	// Default reports whether invoke without @version runs this version.
	Default bool `json:"default"`
	// ArchivedAt is when the version was archived (nil while live): an
	// archived version keeps its history but can no longer be invoked or
	// replayed against, and no longer holds its tools and models.
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// UnpinnedName is the agent name a path gives on routes about the whole
// agent, which take no @version: a pinned ref is problem.NotFound.
func UnpinnedName(ref string) (string, error) {
	name, _, pinned := strings.Cut(ref, "@")
	if pinned {
		return "", problem.New(problem.NotFound, "%q is not an agent name: this route takes the name without @version", ref)
	}
	return name, nil
}

// Ref is name@version.
func (v *Version) Ref() string { return v.Name + "@" + v.Version }

// Inputs is the JSON Schema of the version's invocation context: its
// external block's inputs, or its definition's; nil when it has none or
// its definition does not decode.
func (v *Version) Inputs() json.RawMessage {
	if v.External != nil {
		return v.External.Inputs
	}
	def, errs := DecodeDefinition(v.Definition)
	if len(errs) > 0 {
		return nil
	}
	return def.Inputs
}

// Agent summarises an agent and its versions.
type Agent struct {
	Tenant         string    `json:"-"`
	Name           string    `json:"name"`
	DefaultVersion string    `json:"default_version"`
	LatestVersion  string    `json:"latest_version"`
	Versions       int       `json:"versions"`
	Description    string    `json:"description,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	// ArchivedAt is when the whole agent was archived (nil while live).
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// VersionStore keeps agents and their versions, always within one tenant.
type VersionStore interface {
	// DeployVersion stores v. When v.Version is "", it is assigned the next
	// integer above every integer version of the agent so far, atomically.
	// The first version of an agent becomes its default; a later one only
	// when promote is set. problem.Conflict when the version exists. The
	// version's tools are recorded so a tool in use cannot be deleted.
	DeployVersion(ctx context.Context, v *Version, promote bool, rec *audit.Record) error
	// SetDefault makes an existing version the default.
	SetDefault(ctx context.Context, tenant, name, version string, rec *audit.Record) error
	// Agent returns an agent, or problem.NotFound.
	Agent(ctx context.Context, tenant, name string) (*Agent, error)
	// AgentVersion returns one version ("" = the default), or
	// problem.AgentVersionNotFound (problem.NotFound when the agent does not exist).
	AgentVersion(ctx context.Context, tenant, name, version string) (*Version, error)
	// ListAgents returns the live agents ordered by name, after the given name.
	ListAgents(ctx context.Context, tenant, after string, limit int) ([]*Agent, error)
	// ListAllAgents is ListAgents with the archived agents too.
	ListAllAgents(ctx context.Context, tenant, after string, limit int) ([]*Agent, error)
	// ListVersions returns an agent's versions, newest first.
	ListVersions(ctx context.Context, tenant, name string) ([]*Version, error)
	// ArchiveVersion archives one version (see Archiver).
	ArchiveVersion(ctx context.Context, tenant, name, version string, rec *audit.Record) error
	// ArchiveAgent archives every version of an agent and the agent itself
	// and returns how many versions it archived now (see Archiver).
	ArchiveAgent(ctx context.Context, tenant, name string, rec *audit.Record) (int, error)
}
