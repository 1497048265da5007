package auth

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

// DefaultRevocationTTL is how long a replica trusts the revocation list it
// loaded: a revoked client's tokens stop working on every replica within it
// (SPEC §4 "Data lifecycle and governance": at most 30 s).
const DefaultRevocationTTL = 30 * time.Second

// RevocationStore keeps the OAuth clients' revocation list.
type RevocationStore interface {
	// ListClients returns the clients of a tenant ("" = every tenant),
	// ordered by tenant and id, with RevokedAt set for revoked ones.
	ListClients(ctx context.Context, tenant string) ([]Client, error)
	// RevokeClient adds the client to the revocation list at at, appending
	// rec in the same transaction; problem.NotFound for an unknown client.
	// A client revoked already stays as it was and rec is not appended.
	RevokeClient(ctx context.Context, id string, at time.Time, rec *audit.Record) error
	// RevokedClients returns the ids of every revoked client.
	RevokedClients(ctx context.Context) ([]string, error)
}

// RevokeClient revokes a client: the token endpoint refuses it at once and
// every replica refuses its tokens within its RevokingVerifier's ttl. rec,
// when not nil, is appended to the client's tenant's chain with the
// revocation; its empty Tenant, Action and Resource are filled in here. It
// returns the client as revoked (its first revocation when it was revoked
// already).
func RevokeClient(ctx context.Context, store interface {
	Store
	RevocationStore
}, id string, at time.Time, rec *audit.Record) (Client, error) {
	c, err := store.Client(ctx, id)
	if problem.Is(err, problem.NotFound) {
		return Client{}, problem.New(problem.NotFound, "no client with id %q (agentplane clients list shows them)", id)
	}
	if err != nil {
		return Client{}, err
	}
	if c.RevokedAt != nil {
		return c, nil
	}
	if rec != nil {
		if rec.Tenant == "" {
			rec.Tenant = c.Tenant
		}
		if rec.Action == "" {
			rec.Action = "client.revoke"
		}
		if rec.Resource.ID == "" {
			rec.Resource = audit.Resource{Type: "client", ID: c.ID}
		}
	}
	if err := store.RevokeClient(ctx, id, at, rec); err != nil {
		return Client{}, fmt.Errorf("revoke client: %w", err)
	}
	return store.Client(ctx, id)
}

// Revocations is a replica's copy of the store's revocation list: every
// path that acts with a client's identity (bearer tokens, console sessions
// and sign-in links, schedules) asks it, so all of them stop within one
// ttl of a revocation. It loads the list again once its copy is older than
// ttl; a list that cannot be loaded is an error, never a stale answer.
type Revocations struct {
	store interface {
		RevokedClients(ctx context.Context) ([]string, error)
	}
	ttl time.Duration
	now func() time.Time

	// list is the copy of the revocation list requests read without a
	// lock; mu serialises loading a new one.
	list atomic.Pointer[revocationList]
	mu   sync.Mutex
}

// revocationList is the revocation list as loaded at loadedAt.
type revocationList struct {
	revoked  map[string]bool
	loadedAt time.Time
}

// NewRevocations reads store's revocation list; ttl ≤ 0 means
// DefaultRevocationTTL, now nil time.Now.
func NewRevocations(store interface {
	RevokedClients(ctx context.Context) ([]string, error)
}, ttl time.Duration, now func() time.Time) *Revocations {
	if ttl <= 0 {
		ttl = DefaultRevocationTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Revocations{store: store, ttl: ttl, now: now}
}

// TTL is how long a loaded revocation list is trusted.
func (v *Revocations) TTL() time.Duration { return v.ttl }

// Revoked reports whether clientID is on the revocation list ("" never
// is: a token minted without a client belongs to no client).
func (v *Revocations) Revoked(ctx context.Context, clientID string) (bool, error) {
	if clientID == "" {
		return false, nil
	}
	fresh := func(l *revocationList) bool { return l != nil && v.now().Before(l.loadedAt.Add(v.ttl)) }
	l := v.list.Load()
	if !fresh(l) {
		v.mu.Lock()
		defer v.mu.Unlock()
		if l = v.list.Load(); !fresh(l) { // not loaded meanwhile by another request
			now := v.now()
			ids, err := v.store.RevokedClients(ctx)
			if err != nil {
				return false, fmt.Errorf("read the client revocation list: %w", err)
			}
			l = &revocationList{revoked: make(map[string]bool, len(ids)), loadedAt: now}
			for _, id := range ids {
				l.revoked[id] = true
			}
			v.list.Store(l)
		}
	}
	return l.revoked[clientID], nil
}

// CheckClient is nil when clientID is not revoked, problem.Unauthenticated
// (saying what was revoked) when it is, and problem.Unavailable when the
// list cannot be read: a client's identity is not trusted on a list older
// than the ttl.
func (v *Revocations) CheckClient(ctx context.Context, clientID, what string) error {
	revoked, err := v.Revoked(ctx, clientID)
	if err != nil {
		return problem.Wrap(problem.Unavailable, err, "the client revocation list cannot be read; retry shortly")
	}
	if revoked {
		return unauthenticated(what+"'s client is revoked", nil)
	}
	return nil
}

// RevokingVerifier refuses the tokens of revoked clients, by its
// Revocations: a revocation reaches every replica within their ttl. When
// the list cannot be loaded the tokens of clients are refused (503)
// rather than trusted on a list older than ttl.
type RevokingVerifier struct {
	next Verifier
	*Revocations
}

// NewRevokingVerifier wraps next with a revocation list read from store;
// ttl ≤ 0 means DefaultRevocationTTL.
func NewRevokingVerifier(next Verifier, store interface {
	RevokedClients(ctx context.Context) ([]string, error)
}, ttl time.Duration, now func() time.Time) *RevokingVerifier {
	return NewRevocations(store, ttl, now).Verifier(next)
}

// Verifier wraps next so that it refuses the tokens of clients on v.
func (v *Revocations) Verifier(next Verifier) *RevokingVerifier {
	return &RevokingVerifier{next: next, Revocations: v}
}

// Verify verifies raw with next and refuses it when its client is revoked.
func (v *RevokingVerifier) Verify(ctx context.Context, raw string) (Principal, error) {
	p, err := v.next.Verify(ctx, raw)
	if err != nil || p.ClientID == "" {
		return p, err
	}
	if err := v.CheckClient(ctx, p.ClientID, "the token"); err != nil {
		return Principal{}, err
	}
	return p, nil
}
