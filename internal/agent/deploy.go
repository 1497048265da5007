package agent

import (
	"context"
	"encoding/json"
	"slices"
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
		if x.Tools == nil {
			x.Tools = []string{} // no tools is an empty list, never null
		}
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

// ExternalChecks check what an external version makes the server reach and
// send; a nil func checks nothing.
type ExternalChecks struct {
	// URL refuses a URL's scheme or address, its detail starting with
	// field (outbound.ReceiverRule.Check: a URL the server sends the run's
	// gateway token to).
	URL func(ctx context.Context, field, raw string) error
	// Secret refuses a secrets_ref outside the tenant's allowed references
	// (secrets.Policy.Check), as for tools and models.
	Secret func(tenant, ref string) error
}

// Check checks the external block of v, a version of the tenant; a defined
// version passes.
func (c ExternalChecks) Check(ctx context.Context, tenant string, v *Version) error {
	x := v.External
	if x == nil {
		return nil
	}
	if a := x.Auth; a != nil && a.SecretsRef != "" && c.Secret != nil {
		if err := c.Secret(tenant, a.SecretsRef); err != nil {
			return underExternal(err)
		}
	}
	if c.URL != nil {
		return c.URL(ctx, "external.url", x.URL)
	}
	return nil
}

// underExternal places a problem about the block's auth (whose fields
// are named from auth) under external.
func underExternal(err error) error {
	pe := problem.As(err)
	switch {
	case pe.Code == problem.ValidationFailed:
		errs := slices.Clone(pe.Errors)
		for i := range errs {
			errs[i].Field = "external." + errs[i].Field
		}
		return problem.Validation(errs...)
	case pe.Code != problem.Internal:
		return problem.New(pe.Code, "external.auth: %s", pe.Detail)
	}
	return err
}
