package agent

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// Deployment is a new version of an agent, as a client sends it: the body
// of POST /v1/agents.
type Deployment struct {
	Name string `json:"name"`
	// Version is "" for the next integer version.
	Version     string          `json:"version,omitempty"`
	Description string          `json:"description,omitempty"`
	Definition  json.RawMessage `json:"definition,omitempty"`
	// External is an external version's block (exactly one of Definition
	// and External).
	External json.RawMessage `json:"external,omitempty"`
	// Promote makes the version the default even when it is not the
	// agent's first.
	Promote bool `json:"promote,omitempty"`
}

// Catalogs builds the catalog of a tenant's tools and models (workflow.Runner).
type Catalogs interface {
	// Catalog returns the catalog of the named tools and models, and of
	// the model "default" when the server defines it; unknown names are
	// left out so Compile reports them.
	Catalog(ctx context.Context, tenant string, tools, models []string) (*Catalog, error)
}

// NewVersion checks a deployment of the tenant and compiles its definition
// against the tenant's tools and models, and returns the version to store,
// deployed at at. What is wrong is problem.ValidationFailed naming the deployment's
// fields; the definition's own problems are under definition.
func NewVersion(ctx context.Context, catalogs Catalogs, tenant string, d Deployment, at time.Time) (*Version, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	def, errs := DecodeDefinition(d.Definition)
	if len(errs) == 0 {
		cat, err := catalogs.Catalog(ctx, tenant, def.Tools, def.Models())
		if err != nil {
			return nil, err
		}
		_, errs = Compile(def, cat)
	}
	if len(errs) > 0 {
		for i := range errs {
			errs[i].Field = strings.TrimSuffix("definition."+errs[i].Field, ".")
		}
		return nil, problem.Validation(errs...)
	}
	return &Version{
		Tenant: tenant, Name: d.Name, Version: d.Version, Description: d.Description,
		Definition: d.Definition, Tools: def.Tools, Models: def.Models(), DeployedAt: at,
	}, nil
}

// check validates the deployment's fields other than the definition's content.
func (d *Deployment) check() error {
	var errs []problem.FieldError
	switch {
	case !NameRE.MatchString(d.Name):
		errs = append(errs, problem.FieldError{Field: "name", Message: "must match " + NameRE.String()})
	case d.Name == OperationAgent:
		errs = append(errs, problem.FieldError{Field: "name", Message: "is reserved: " + OperationAgent + "@<tool>.<operation> names the direct call of one operation; choose another name"})
	}
	if d.Version != "" && !VersionRE.MatchString(d.Version) {
		errs = append(errs, problem.FieldError{Field: "version", Message: "must match " + VersionRE.String()})
	}
	if len(d.Description) > 2000 {
		errs = append(errs, problem.FieldError{Field: "description", Message: "must be at most 2000 characters"})
	}
	if len(d.Definition) == 0 || string(d.Definition) == "null" {
		errs = append(errs, problem.FieldError{Field: "definition", Message: "is required"})
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	return nil
}
