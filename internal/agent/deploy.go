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

// NewVersion checks a deployment of the tenant and compiles its definition,
// or its external block, against the tenant's tools and models, and
// returns the version to store, deployed at at. What is wrong is
// problem.ValidationFailed naming the deployment's fields; the block's own
// problems are under definition or external.
func NewVersion(ctx context.Context, catalogs Catalogs, tenant string, d Deployment, at time.Time) (*Version, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	v := &Version{Tenant: tenant, Name: d.Name, Version: d.Version, Description: d.Description, DeployedAt: at}
	var errs []problem.FieldError
	prefix := "definition."
	if present(d.External) {
		prefix = "external."
		x, xerrs := DecodeExternal(d.External)
		errs = xerrs
		if len(errs) == 0 {
			cat, err := catalogs.Catalog(ctx, tenant, x.Tools, x.ModelNames())
			if err != nil {
				return nil, err
			}
			_, errs = CompileExternal(x, cat)
		}
		v.External, v.Tools, v.Models = &x, x.Tools, x.ModelNames()
	} else {
		def, derrs := DecodeDefinition(d.Definition)
		errs = derrs
		if len(errs) == 0 {
			cat, err := catalogs.Catalog(ctx, tenant, def.Tools, def.Models())
			if err != nil {
				return nil, err
			}
			_, errs = Compile(def, cat)
		}
		v.Definition, v.Tools, v.Models = d.Definition, def.Tools, def.Models()
	}
	if len(errs) > 0 {
		for i := range errs {
			errs[i].Field = strings.TrimSuffix(prefix+errs[i].Field, ".")
		}
		return nil, problem.Validation(errs...)
	}
	return v, nil
}

// present reports whether a block of the deployment was given.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// check validates the deployment's fields other than its block's content.
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
	switch def, ext := present(d.Definition), present(d.External); {
	case !def && !ext:
		errs = append(errs, problem.FieldError{Field: "definition", Message: "is required: give exactly one of definition and external"})
	case def && ext:
		errs = append(errs, problem.FieldError{Field: "external", Message: "is given along with definition: give exactly one of definition and external"})
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	return nil
}
