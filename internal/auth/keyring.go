package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentplane/agentplane/internal/ids"
)

// publishedKeys is how many of the newest keys are published and accepted:
// the current one and the one before it, so tokens signed just before a
// rotation stay valid until they expire.
const publishedKeys = 2

// reloadRetry is how long a keyring that failed to reload keeps serving its
// cached keys before it reads the store again.
const reloadRetry = 5 * time.Second

// key is a parsed signing key.
type key struct {
	id      string
	alg     jose.SignatureAlgorithm
	private jose.JSONWebKey
	public  jose.JSONWebKey
}

// keyring caches the store's signing keys. It reloads them when its copy is
// older than maxAge, and on an unknown key id at most once per minRefresh,
// so a flood of tokens with made-up key ids costs at most one read per
// interval. A failed reload is retried no sooner than reloadRetry later.
type keyring struct {
	store      Store
	now        func() time.Time
	maxAge     time.Duration
	minRefresh time.Duration

	mu       sync.Mutex
	keys     []key // newest first, at most publishedKeys
	loaded   bool
	loadedAt time.Time
	// retryAt, after a failed reload of cached keys, is when the store may
	// be read again.
	retryAt time.Time
}

func newKeyring(store Store, now func() time.Time, maxAge, minRefresh time.Duration) *keyring {
	return &keyring{store: store, now: now, maxAge: maxAge, minRefresh: minRefresh}
}

// current returns the key to sign with.
func (r *keyring) current(ctx context.Context) (key, error) {
	keys, err := r.all(ctx)
	if err != nil {
		return key{}, err
	}
	if len(keys) == 0 {
		return key{}, errors.New("no signing key")
	}
	return keys[0], nil
}

// all returns the published keys, newest first.
func (r *keyring) all(ctx context.Context) ([]key, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refreshLocked(ctx, false); err != nil {
		return nil, err
	}
	return r.keys, nil
}

// lookup returns the published key with the given id, reloading once when
// the id is unknown and the last reload is old enough.
func (r *keyring) lookup(ctx context.Context, kid string) (key, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refreshLocked(ctx, false); err != nil {
		return key{}, false, err
	}
	if k, ok := r.findLocked(kid); ok {
		return k, true, nil
	}
	if r.now().Sub(r.loadedAt) < r.minRefresh {
		return key{}, false, nil
	}
	if err := r.refreshLocked(ctx, true); err != nil {
		return key{}, false, err
	}
	k, ok := r.findLocked(kid)
	return k, ok, nil
}

// invalidate makes the next access reload the keys.
func (r *keyring) invalidate() {
	r.mu.Lock()
	r.loaded = false
	r.mu.Unlock()
}

func (r *keyring) findLocked(kid string) (key, bool) {
	for _, k := range r.keys {
		if k.id == kid {
			return k, true
		}
	}
	return key{}, false
}

// refreshLocked reloads the keys when forced, never loaded, or stale. A
// failed reload of a stale copy keeps the copy, and the store is not read
// again until reloadRetry has passed, forced or not: a store blip must
// neither refuse every token nor turn every verification into a store read
// under the lock.
func (r *keyring) refreshLocked(ctx context.Context, force bool) error {
	now := r.now()
	if r.loaded && (!force && now.Sub(r.loadedAt) < r.maxAge || now.Before(r.retryAt)) {
		return nil
	}
	stored, err := r.store.SigningKeys(ctx)
	if err != nil {
		if r.loaded && len(r.keys) > 0 {
			r.retryAt = now.Add(reloadRetry)
			return nil
		}
		return fmt.Errorf("load signing keys: %w", err)
	}
	keys := make([]key, 0, publishedKeys)
	for _, sk := range stored {
		if len(keys) == publishedKeys {
			break
		}
		k, err := parseKey(sk)
		if err != nil {
			return fmt.Errorf("load signing key %s: %w", sk.ID, err)
		}
		keys = append(keys, k)
	}
	r.keys, r.loaded, r.loadedAt, r.retryAt = keys, true, now, time.Time{}
	return nil
}

// parseKey reads a stored private JWK and checks it signs with an allowed
// algorithm.
func parseKey(sk SigningKey) (key, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(sk.PrivateJWK); err != nil {
		return key{}, fmt.Errorf("parse jwk: %w", err)
	}
	if jwk.IsPublic() {
		return key{}, errors.New("jwk is not a private key")
	}
	alg := jose.SignatureAlgorithm(sk.Algorithm)
	if !isAllowed(alg) {
		return key{}, fmt.Errorf("algorithm %q is not allowed", sk.Algorithm)
	}
	jwk.KeyID, jwk.Algorithm, jwk.Use = sk.ID, string(alg), "sig"
	return key{id: sk.ID, alg: alg, private: jwk, public: jwk.Public()}, nil
}

func isAllowed(alg jose.SignatureAlgorithm) bool {
	return slices.Contains(allowedAlgs, alg)
}

// newSigningKey makes a fresh ES256 key with a new key id.
func newSigningKey(now time.Time) (SigningKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return SigningKey{}, fmt.Errorf("generate signing key: %w", err)
	}
	id := ids.NewAt(ids.Key, now)
	b, err := jose.JSONWebKey{Key: priv, KeyID: id, Algorithm: string(jose.ES256), Use: "sig"}.MarshalJSON()
	if err != nil {
		return SigningKey{}, fmt.Errorf("encode signing key: %w", err)
	}
	return SigningKey{ID: id, Algorithm: string(jose.ES256), PrivateJWK: b, CreatedAt: now}, nil
}
