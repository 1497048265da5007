package model

import (
	"context"
)

// registry is the Lookup of NewLookup.
type registry struct {
	store Store
	def   *Model
}

// NewLookup returns the Lookup of agents: a name is the tenant's registered
// model, and DefaultName is defaultModel, the server-wide model of the
// --llm-* flags, when there is one (otherwise not found). Nothing is cached:
// a model is one indexed read, and an update is seen at once.
func NewLookup(store Store, defaultModel *Model) Lookup {
	return &registry{store: store, def: defaultModel}
}

// Model returns a copy of the model, or problem.NotFound.
func (r *registry) Model(ctx context.Context, tenant, name string) (*Model, error) {
	if name == DefaultName {
		if r.def == nil {
			return nil, notFoundDefault()
		}
		m := *r.def
		m.Tenant = tenant
		return &m, nil
	}
	if !NameRE.MatchString(name) {
		return nil, NotFound(name)
	}
	return r.store.ModelByName(ctx, tenant, name)
}
