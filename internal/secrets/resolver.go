package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	vault "github.com/hashicorp/vault/api"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
)

// DefaultMaxFileBytes limits a file:// secret.
const DefaultMaxFileBytes = 64 << 10

// ErrUnresolved is the cause of every failure to read a secret's value.
var ErrUnresolved = errors.New("secret could not be resolved")

// Options configures a Resolver.
type Options struct {
	// Policy is checked again on every Resolve; required.
	Policy *Policy
	// Getenv looks up environment variables; default os.LookupEnv.
	Getenv func(string) (string, bool)
	// MaxFileBytes limits a file:// secret; default 64 KiB.
	MaxFileBytes int64
	// VaultAddr and VaultToken default to VAULT_ADDR and VAULT_TOKEN.
	VaultAddr  string
	VaultToken string
	// VaultHTTPClient carries requests to Vault; default an outbound client
	// refusing private addresses, so a Vault on a private network needs one
	// from an outbound.Client the operator allowed.
	VaultHTTPClient *http.Client
}

// Resolver reads secrets' values.
type Resolver struct {
	opts Options

	mu    sync.Mutex
	vault *vault.Client
}

// NewResolver returns a resolver; it contacts nothing until a vault:// secret
// is resolved.
func NewResolver(opts Options) (*Resolver, error) {
	if opts.Policy == nil {
		return nil, errors.New("secrets resolver: a policy is required")
	}
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.VaultAddr == "" {
		opts.VaultAddr, _ = opts.Getenv("VAULT_ADDR")
	}
	if opts.VaultToken == "" {
		opts.VaultToken, _ = opts.Getenv("VAULT_TOKEN")
	}
	return &Resolver{opts: opts}, nil
}

// Policy returns the resolver's policy.
func (r *Resolver) Policy() *Policy { return r.opts.Policy }

// Resolve checks ref against the policy for tenant and returns the secret's
// value. Policy errors are *problem.Error; a value that cannot be read is an
// error wrapping ErrUnresolved that names the ref and why, never the value.
func (r *Resolver) Resolve(ctx context.Context, tenant, ref string) (string, error) {
	if err := r.opts.Policy.Check(tenant, ref); err != nil {
		return "", err
	}
	parsed, err := ParseRef(ref)
	if err != nil {
		return "", err
	}
	var v string
	switch parsed.Scheme {
	case Env:
		v, err = r.env(parsed)
	case File:
		v, err = r.file(parsed)
	case Vault:
		v, err = r.vaultSecret(ctx, parsed)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrUnresolved, ref, err)
	}
	return v, nil
}

func (r *Resolver) env(ref Ref) (string, error) {
	v, ok := r.opts.Getenv(ref.Name)
	if !ok || v == "" {
		return "", errors.New("the environment variable is not set")
	}
	return v, nil
}

func (r *Resolver) file(ref Ref) (string, error) {
	f, err := os.Open(ref.Path)
	if err != nil {
		return "", errors.New("the file cannot be opened")
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, r.opts.MaxFileBytes+1))
	if err != nil {
		return "", errors.New("the file cannot be read")
	}
	if int64(len(b)) > r.opts.MaxFileBytes {
		return "", fmt.Errorf("the file is over the size limit of %s", outbound.Size(r.opts.MaxFileBytes))
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", errors.New("the file is empty")
	}
	return v, nil
}

// vaultClient builds the Vault client on first use.
func (r *Resolver) vaultClient() (*vault.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.vault != nil {
		return r.vault, nil
	}
	if r.opts.VaultAddr == "" {
		return nil, errors.New("vault is not configured (set VAULT_ADDR)")
	}
	hc := r.opts.VaultHTTPClient
	if hc == nil {
		hc = outbound.New(outbound.Options{}).HTTPClient()
	}
	// A copy: the Vault client changes its HTTP client's redirect policy.
	copied := *hc
	c, err := vault.NewClient(&vault.Config{
		Address:    r.opts.VaultAddr,
		HttpClient: &copied,
		MaxRetries: 0,
		Timeout:    hc.Timeout,
	})
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	c.SetToken(r.opts.VaultToken)
	r.vault = c
	return c, nil
}

func (r *Resolver) vaultSecret(ctx context.Context, ref Ref) (string, error) {
	c, err := r.vaultClient()
	if err != nil {
		return "", err
	}
	s, err := c.KVv2(ref.Mount).Get(ctx, ref.Path)
	if err != nil {
		return "", vaultError(err)
	}
	if ref.Key == "" {
		b, err := json.Marshal(s.Data)
		if err != nil {
			return "", errors.New("the secret's data cannot be encoded")
		}
		return string(b), nil
	}
	switch v := s.Data[ref.Key].(type) {
	case nil:
		return "", errors.New("the secret has no such key")
	case string:
		if v == "" {
			return "", errors.New("the key's value is empty")
		}
		return v, nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "", errors.New("the key's value cannot be encoded")
		}
		return string(b), nil
	}
}

// vaultError says why a Vault read failed without quoting Vault's answer.
func vaultError(err error) error {
	var re *vault.ResponseError
	var pe *problem.Error
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("vault request refused: %s", pe.Detail)
	case errors.Is(err, vault.ErrSecretNotFound):
		return errors.New("vault has no such secret")
	case errors.As(err, &re):
		return fmt.Errorf("vault answered status %d", re.StatusCode)
	default:
		return fmt.Errorf("vault could not be reached: %s", outbound.Reason(err, 0))
	}
}
