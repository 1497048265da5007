package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

// memStore is an in-memory Store.
type memStore struct {
	mu       sync.Mutex
	keys     []SigningKey // newest first
	clients  map[string]Client
	audits   []audit.Record
	secrets  map[string][]byte
	keyReads int
	fail     error // when set, SigningKeys returns it
}

var _ Store = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{clients: map[string]Client{}, secrets: map[string][]byte{}}
}

func (m *memStore) SigningKeys(context.Context) ([]SigningKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keyReads++
	if m.fail != nil {
		return nil, m.fail
	}
	return slices.Clone(m.keys), nil
}

func (m *memStore) AddSigningKey(_ context.Context, k SigningKey, onlyIfNone bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if onlyIfNone && len(m.keys) > 0 {
		return false, nil
	}
	m.keys = append([]SigningKey{k}, m.keys...)
	return true, nil
}

func (m *memStore) CreateClient(_ context.Context, c Client, rec *audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.clients[c.ID]; ok {
		return problem.New(problem.Conflict, "client %s exists", c.ID)
	}
	m.clients[c.ID] = c
	if rec != nil {
		m.audits = append(m.audits, *rec)
	}
	return nil
}

func (m *memStore) Client(_ context.Context, id string) (Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.clients[id]
	if !ok {
		return Client{}, problem.New(problem.NotFound, "no client %s", id)
	}
	return c, nil
}

func (m *memStore) ServerSecret(_ context.Context, name string, value []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.secrets[name]; ok {
		return v, nil
	}
	m.secrets[name] = value
	return value, nil
}

func (m *memStore) reads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keyReads
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const testIssuer = "https://agentplane.test"

// newTestIssuer returns an issuer and a verifier sharing a fresh store and clock.
func newTestIssuer(t *testing.T) (*Issuer, *EmbeddedVerifier, *memStore, *clock) {
	t.Helper()
	st, clk := newMemStore(), newClock()
	iss, err := NewIssuer(context.Background(), st, testIssuer, clk.Now)
	if err != nil {
		t.Fatalf("NewIssuer: %v", err)
	}
	return iss, NewEmbeddedVerifier(st, Config{Issuer: testIssuer, Now: clk.Now}), st, clk
}

// mint signs a token with the issuer or fails the test.
func mint(t *testing.T, iss *Issuer, req MintRequest) string {
	t.Helper()
	raw, err := iss.Mint(context.Background(), req)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return raw
}

// validClaims returns the claims of a good token at now.
func validClaims(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "aud": []string{"agentplane", "other"}, "sub": "user-1",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "tools:read",
		"tenant": "acme",
	}
}

// currentKey returns the store's newest key, parsed.
func currentKey(t *testing.T, st *memStore) key {
	t.Helper()
	k, err := parseKey(st.keys[0])
	if err != nil {
		t.Fatalf("parseKey: %v", err)
	}
	return k
}

// signClaims signs claims with k and the given typ header.
func signClaims(t testing.TB, k key, typ string, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.private}, opts)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatalf("Serialize: %v", err)
	}
	return raw
}

// handMade assembles a compact JWS from a header, claims and a signature.
func handMade(t testing.TB, header, claims map[string]any, sig func(signingInput string) []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(sig(input))
}

// refusal returns the detail of an Unauthenticated error, or fails the test.
func refusal(t *testing.T, err error) string {
	t.Helper()
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.Unauthenticated {
		t.Fatalf("error = %v, want an unauthenticated problem", err)
	}
	return pe.Detail
}

// tamper flips a character of the token's signature.
func tamper(raw string) string {
	i := strings.LastIndexByte(raw, '.') + 5
	c := byte('A')
	if raw[i] == 'A' {
		c = 'B'
	}
	return raw[:i] + string(c) + raw[i+1:]
}
