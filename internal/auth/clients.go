package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
)

// maxClientName bounds a client's display name.
const maxClientName = 200

// CreateClient creates an OAuth client of the client-credentials grant for
// tenant, allowed the given scopes, and returns its id and secret. The
// secret is shown this once: the store keeps only its SHA-256. rec, when
// not nil, is written in the same transaction; its empty Tenant, Action and
// Resource are filled in here.
func CreateClient(ctx context.Context, store Store, tenant, name string, scopes []string, rec *audit.Record) (clientID, secret string, err error) {
	var errs []problem.FieldError
	switch {
	case tenant == "":
		errs = append(errs, problem.FieldError{Field: "tenant", Message: "is required"})
	case tenant == audit.SystemTenant:
		errs = append(errs, problem.FieldError{Field: "tenant", Message: fmt.Sprintf("%q is reserved", tenant)})
	}
	if len(name) > maxClientName {
		errs = append(errs, problem.FieldError{Field: "name", Message: fmt.Sprintf("must be at most %d bytes", maxClientName)})
	}
	if len(scopes) == 0 {
		errs = append(errs, problem.FieldError{Field: "scope", Message: "at least one scope is required"})
	}
	for _, s := range scopes {
		if !ValidScope(s) {
			errs = append(errs, problem.FieldError{Field: "scope", Message: fmt.Sprintf("%q is not a valid scope", s)})
			break
		}
	}
	if len(errs) > 0 {
		return "", "", problem.Validation(errs...)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", fmt.Errorf("generate client secret: %w", err)
	}
	secret = base64.RawURLEncoding.EncodeToString(raw)
	clientID = ids.New(ids.Client)
	if name == "" {
		name = clientID
	}
	c := Client{
		ID:         clientID,
		Tenant:     tenant,
		Name:       name,
		SecretHash: hashSecret(secret),
		Scopes:     slices.Compact(slices.Sorted(slices.Values(scopes))),
		CreatedAt:  time.Now().UTC(),
	}
	if rec != nil {
		if rec.Tenant == "" {
			rec.Tenant = tenant
		}
		if rec.Action == "" {
			rec.Action = "clients.create"
		}
		if rec.Resource.ID == "" {
			rec.Resource = audit.Resource{Type: "oauth_client", ID: clientID}
		}
	}
	if err := store.CreateClient(ctx, c, rec); err != nil {
		return "", "", fmt.Errorf("create client: %w", err)
	}
	return clientID, secret, nil
}

// hashSecret returns hex(SHA-256(secret)), the stored form of a secret.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// dummyHash is compared against when the client does not exist, so an
// unknown client id costs the same as a wrong secret.
var dummyHash = hashSecret("agentplane-no-such-client")

// authenticateClient returns the client whose id and secret these are.
func (i *Issuer) authenticateClient(ctx context.Context, id, secret string) (Client, error) {
	c, err := i.store.Client(ctx, id)
	want := c.SecretHash
	var pe *problem.Error
	switch {
	case err == nil:
	case errors.As(err, &pe) && pe.Code == problem.NotFound:
		want = dummyHash
	default:
		return Client{}, fmt.Errorf("load client: %w", err)
	}
	got := hashSecret(secret)
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 || err != nil {
		return Client{}, invalidClient("client authentication failed")
	}
	if c.RevokedAt != nil {
		return Client{}, invalidClient("the client is revoked")
	}
	return c, nil
}
