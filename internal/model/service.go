package model

import (
	"context"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
)

// SecretPolicy says whether a tenant may use a secrets reference (the same
// allow-list as tools: secrets.Policy).
type SecretPolicy interface {
	Check(tenant, ref string) error
}

// AddressPolicy refuses a base_url whose host outgoing requests may not
// reach (outbound.Client.CheckHost); the dialler checks again on every call.
type AddressPolicy interface {
	CheckHost(ctx context.Context, rawURL string) error
}

// Service registers, updates and deletes a tenant's models.
type Service struct {
	Store   Store
	Secrets SecretPolicy
	// Addresses, when set, refuses base_url hosts at registration.
	Addresses AddressPolicy
	Now       func() time.Time
}

// check builds the model of reg and checks its secret and address.
func (s *Service) check(ctx context.Context, tenant string, reg Registration) (*Model, error) {
	m, err := Build(reg)
	if err != nil {
		return nil, err
	}
	if m.Auth.SecretsRef != "" && s.Secrets != nil {
		if err := s.Secrets.Check(tenant, m.Auth.SecretsRef); err != nil {
			return nil, err
		}
	}
	if s.Addresses != nil {
		if err := s.Addresses.CheckHost(ctx, m.BaseURL); err != nil {
			return nil, err
		}
	}
	m.Tenant = tenant
	return m, nil
}

// now is the time of a change, to the microsecond stores keep.
func (s *Service) now() time.Time {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return now().UTC().Truncate(time.Microsecond)
}

// Register validates and stores a new model, storing rec with it.
func (s *Service) Register(ctx context.Context, tenant string, reg Registration, rec *audit.Record) (*Model, error) {
	m, err := s.check(ctx, tenant, reg)
	if err != nil {
		return nil, err
	}
	now := s.now()
	m.ID, m.Revision, m.CreatedAt, m.UpdatedAt = ids.NewAt(ids.Model, now), 1, now, now
	if rec != nil {
		rec.Resource = audit.Resource{Type: "model", ID: m.ID}
	}
	if err := s.Store.CreateModel(ctx, m, rec); err != nil {
		return nil, err
	}
	return m, nil
}

// Update replaces the model named name with the whole body reg; the name
// cannot change, and the revision goes up by one.
func (s *Service) Update(ctx context.Context, tenant, name string, reg Registration, rec *audit.Record) (*Model, error) {
	old, err := s.Get(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	if reg.Name == "" {
		reg.Name = old.Name
	}
	if reg.Name != old.Name {
		return nil, problem.Field("name", "cannot change (the model is %q); register a new model instead", old.Name)
	}
	m, err := s.check(ctx, tenant, reg)
	if err != nil {
		return nil, err
	}
	m.ID, m.Revision, m.CreatedAt, m.UpdatedAt = old.ID, old.Revision+1, old.CreatedAt, s.now()
	if rec != nil {
		rec.Resource = audit.Resource{Type: "model", ID: m.ID}
	}
	if err := s.Store.UpdateModel(ctx, m, rec); err != nil {
		return nil, err
	}
	return m, nil
}

// Delete deletes the model named name, storing rec with the deletion;
// problem.Conflict while an agent version names it.
func (s *Service) Delete(ctx context.Context, tenant, name string, rec *audit.Record) error {
	m, err := s.Get(ctx, tenant, name)
	if err != nil {
		return err
	}
	if rec != nil {
		rec.Resource = audit.Resource{Type: "model", ID: m.ID}
	}
	return s.Store.DeleteModel(ctx, tenant, name, rec)
}

// Get returns the tenant's model named name, or problem.NotFound.
func (s *Service) Get(ctx context.Context, tenant, name string) (*Model, error) {
	if !NameRE.MatchString(name) {
		return nil, NotFound(name)
	}
	return s.Store.ModelByName(ctx, tenant, name)
}

// List returns a page of the tenant's models, ordered by name.
func (s *Service) List(ctx context.Context, tenant string, opt ListOptions) ([]*Model, error) {
	return s.Store.ListModels(ctx, tenant, opt)
}

// NotFound is the error of a name the tenant's registry lacks.
func NotFound(name string) error {
	return problem.New(problem.NotFound, "no model named %q; GET /v1/models lists the registered ones", name)
}

// ChangedMeanwhile is the error of an update that lost a race with another.
func ChangedMeanwhile(name string) error {
	return problem.New(problem.Conflict, "model %q was changed by another request meanwhile; GET it and send the PUT again", name)
}

// NameTaken is the error of registering a name the tenant already has.
func NameTaken(name string) error {
	return problem.New(problem.Conflict, "a model named %q already exists; PUT /v1/models/%s replaces it", name, name)
}

func notFoundDefault() error {
	return problem.New(problem.NotFound, "no model named %q: this server has no server-wide model (agentplane serve --llm-base-url and --llm-model define it); register a model with POST /v1/models and name it instead", DefaultName)
}
