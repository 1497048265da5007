package web

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
)

// SecretName names the viewer's HMAC key among the store's server secrets.
const SecretName = "viewer-hmac"

// Secrets keeps server-wide secrets (auth.Store).
type Secrets interface {
	ServerSecret(ctx context.Context, name string, value []byte) ([]byte, error)
}

// LoadSigner returns a Signer keyed by the store's viewer key, making the
// key on first use: it lives in the store, not a replica's data directory,
// so a link signed by one replica is valid on every other.
func LoadSigner(ctx context.Context, st Secrets, ttl time.Duration) (*Signer, error) {
	fresh := make([]byte, MinKeyLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("make the viewer key: %w", err)
	}
	key, err := st.ServerSecret(ctx, SecretName, fresh)
	if err != nil {
		return nil, fmt.Errorf("load the viewer key: %w", err)
	}
	return NewSigner(key, ttl, nil)
}
