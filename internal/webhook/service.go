package webhook

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
)

// Input is the body of POST /v1/webhooks.
type Input struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Agent       string   `json:"agent"`
	Description string   `json:"description"`
	// WorkflowID limits the webhook to one workflow's events (an A2A
	// push-notification config); Secret, when set, is its signing secret
	// (the config's token). Neither is a field of POST /v1/webhooks.
	WorkflowID string `json:"-"`
	Secret     string `json:"-"`
}

// Service creates webhooks and rotates their secrets for the API.
type Service struct {
	Store    Store
	Versions agent.VersionStore
	// CheckHost checks a URL against the outbound address policy, its
	// host name looked up (the outbound client's CheckHost); nil checks
	// nothing more. Each delivery checks the address it dials again.
	CheckHost func(ctx context.Context, raw string) error
	// AllowHTTP allows http:// URLs (loopback and private addresses, in
	// demos and tests); otherwise https is required, except for the hosts
	// HTTPHost accepts (--allow-private-host entries).
	AllowHTTP bool
	HTTPHost  func(raw string) bool
	Now       func() time.Time
}

// checkURL returns what is wrong with a receiver's URL: a rule it breaks
// as a field error, a scheme or address refused as problem.URLNotAllowed.
func (s *Service) checkURL(ctx context.Context, raw string) (*problem.FieldError, error) {
	u, err := url.Parse(raw)
	web := err == nil && (u.Scheme == "https" || u.Scheme == "http")
	switch {
	case raw == "" || err != nil || u.Scheme == "" || web && u.Host == "":
		return &problem.FieldError{Field: "url", Message: "is required: an absolute https URL"}, nil
	case web && u.User != nil:
		return &problem.FieldError{Field: "url", Message: "must not hold credentials"}, nil
	}
	rule := outbound.ReceiverRule{CheckHost: s.CheckHost, AllowHTTP: s.AllowHTTP, HTTPHost: s.HTTPHost}
	return nil, rule.Check(ctx, "url", raw)
}

func (s *Service) check(ctx context.Context, tenant string, in *Input) error {
	var errs []problem.FieldError
	bad, err := s.checkURL(ctx, in.URL)
	if err != nil {
		return err
	}
	if bad != nil {
		errs = append(errs, *bad)
	}
	if len(in.Events) == 0 {
		errs = append(errs, problem.FieldError{Field: "events", Message: "is required: one or more of " + strings.Join(EventTypes, ", ")})
	}
	for i, e := range in.Events {
		if !slices.Contains(EventTypes, e) {
			errs = append(errs, problem.FieldError{Field: fmt.Sprintf("events[%d]", i), Message: fmt.Sprintf("%q is not an event; use one of %s", e, strings.Join(EventTypes, ", "))})
		}
	}
	slices.Sort(in.Events)
	in.Events = slices.Compact(in.Events)
	if in.Secret != "" {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(in.Secret, SecretPrefix))
		if !strings.HasPrefix(in.Secret, SecretPrefix) || err != nil || len(key) < 24 || len(key) > 64 {
			errs = append(errs, problem.FieldError{Field: "token", Message: "must be a Standard Webhooks secret: whsec_ and the base64 of 24 to 64 random bytes"})
		}
	}
	if len(in.Description) > 1000 {
		errs = append(errs, problem.FieldError{Field: "description", Message: "is at most 1000 characters"})
	}
	if in.Agent != "" && s.Versions != nil {
		_, err := s.Versions.AgentVersion(ctx, tenant, in.Agent, "")
		switch {
		case problem.Is(err, problem.NotFound), problem.Is(err, problem.AgentVersionNotFound):
			errs = append(errs, problem.FieldError{Field: "agent", Message: fmt.Sprintf("%q is not a deployed agent of this tenant", in.Agent)})
		case err != nil:
			return err
		}
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	return nil
}

// Create stores a new webhook with a new secret, returned this once.
func (s *Service) Create(ctx context.Context, tenant string, in Input, rec *audit.Record) (*Webhook, error) {
	if err := s.check(ctx, tenant, &in); err != nil {
		return nil, err
	}
	now := s.Now().UTC().Truncate(time.Microsecond)
	w := &Webhook{ID: ids.NewAt(ids.Webhook, now), Tenant: tenant, URL: in.URL, Events: in.Events, Agent: in.Agent,
		Description: in.Description, Secret: in.Secret, WorkflowID: in.WorkflowID, CreatedAt: now}
	if w.Secret == "" {
		w.Secret = NewSecret()
	}
	if rec != nil {
		rec.Resource = audit.Resource{Type: "webhook", ID: w.ID}
	}
	if err := s.Store.CreateWebhook(ctx, w, rec); err != nil {
		return nil, err
	}
	return w, nil
}

// Rotate gives a webhook a new secret, returned this once; the old one
// signs too for RetryFor.
func (s *Service) Rotate(ctx context.Context, tenant, id string, rec *audit.Record) (*Webhook, error) {
	secret := NewSecret()
	if err := s.Store.RotateSecret(ctx, tenant, id, secret, s.Now().Add(RetryFor), rec); err != nil {
		return nil, err
	}
	w, err := s.Store.Webhook(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return w, nil
}
