// Package secrets resolves a tool's secrets_ref (env://NAME, file:///path,
// vault://mount/path#key) under the operator's allow-list. A secret's value is
// read only when a call needs it; it never appears in an error or a log.
package secrets

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
)

// Schemes of a reference.
const (
	Env   = "env"
	File  = "file"
	Vault = "vault"
)

// DefaultAllow is the allow-list when the operator names none.
var DefaultAllow = []string{"env://TOOL_*"}

// Ref is a parsed secrets_ref.
type Ref struct {
	Scheme string
	// Name is the environment variable (env).
	Name string
	// Path is the absolute file path (file) or the secret's path within
	// its mount (vault).
	Path string
	// Mount is the Vault KV v2 mount (vault).
	Mount string
	// Key selects one key of a Vault secret; "" means the whole secret's data
	// as a JSON object.
	Key string
}

var (
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	vaultPart = regexp.MustCompile(`^[A-Za-z0-9_.@+=-]+$`)
	vaultKey  = regexp.MustCompile(`^[A-Za-z0-9_.@+=/-]+$`)
)

// field is where secrets_ref errors point in a registration body.
const field = "auth.secrets_ref"

// ParseRef parses and validates a reference. Its errors are
// problem.ValidationFailed about auth.secrets_ref.
func ParseRef(ref string) (Ref, error) {
	scheme, rest, ok := strings.Cut(ref, "://")
	if !ok {
		return Ref{}, problem.Field(field, "must be env://NAME, file:///path or vault://mount/path#key")
	}
	switch scheme {
	case Env:
		if !envName.MatchString(rest) {
			return Ref{}, problem.Field(field, "env:// must name an environment variable (letters, digits, _)")
		}
		return Ref{Scheme: Env, Name: rest}, nil
	case File:
		if !strings.HasPrefix(rest, "/") || path.Clean(rest) != rest || strings.ContainsAny(rest, "\x00#?") {
			return Ref{}, problem.Field(field, "file:// must name a clean absolute path (file:///run/secrets/name)")
		}
		return Ref{Scheme: File, Path: rest}, nil
	case Vault:
		p, key, _ := strings.Cut(rest, "#")
		parts := strings.Split(p, "/")
		if len(parts) < 2 {
			return Ref{}, problem.Field(field, "vault:// must name a mount and a path (vault://mount/path#key)")
		}
		for _, s := range parts {
			if !vaultPart.MatchString(s) || s == "." || s == ".." {
				return Ref{}, problem.Field(field, "vault:// path segments must be non-empty names without . or .. segments")
			}
		}
		if strings.Contains(rest, "#") && !vaultKey.MatchString(key) {
			return Ref{}, problem.Field(field, "vault:// key after # must be a non-empty name")
		}
		return Ref{Scheme: Vault, Mount: parts[0], Path: strings.Join(parts[1:], "/"), Key: key}, nil
	default:
		return Ref{}, problem.Field(field, "scheme %q is not supported (use env, file or vault)", scheme)
	}
}

// Policy is the operator's allow-list of references. Patterns are references
// in which {tenant} stands for the caller's tenant and * for any run of
// characters: env://TOOL_*, vault://kv/tenants/{tenant}/*, file:///run/secrets/*.
//
// A pattern with {tenant} grants a reference to at most one tenant. Three
// rules make that so:
//
//   - {tenant} matches only a tenant made of tenant characters (ASCII
//     letters, digits, '.', '_' and '-'). A tenant with any other character
//     (a '/', a space, a '*') matches no {tenant} pattern.
//   - Each {tenant} is followed by the end of the pattern or by a literal
//     character that is not a tenant character ('/', say): env://TOOL_{tenant}
//     and vault://kv/tenants/{tenant}/* are valid, file:///run/secrets/{tenant}-*
//     and env://TOOL_{tenant}_* are not, as acme-prod-stripe would match both
//     tenant acme and tenant acme-prod. Each {tenant} also comes before the
//     first *, so the text before it is fixed.
//   - Of two {tenant} patterns, the text before the first {tenant} of one is
//     not a proper prefix of the other's: vault://kv/{tenant}/* and
//     vault://kv/shared/{tenant}/* together would give tenant shared the
//     secrets of every tenant under kv/shared.
//
// The tenant a {tenant} pattern grants a reference to is then the longest run
// of tenant characters at a fixed offset of the reference, the same for every
// such pattern the reference can match. A pattern without {tenant} grants its
// references to every tenant.
type Policy struct {
	patterns  []string
	allowFile bool
}

// NewPolicy returns the policy of the given patterns (DefaultAllow when there
// are none). file:// references are allowed only with allowFile
// (--allow-file-secrets), and then only those matching a file:// pattern.
func NewPolicy(patterns []string, allowFile bool) (*Policy, error) {
	if len(patterns) == 0 {
		patterns = DefaultAllow
	}
	for _, p := range patterns {
		scheme, _, ok := strings.Cut(p, "://")
		switch {
		case !ok || (scheme != Env && scheme != File && scheme != Vault):
			return nil, fmt.Errorf("secret reference pattern %q: must start with env://, file:// or vault://", p)
		case scheme == File && !allowFile:
			return nil, fmt.Errorf("secret reference pattern %q: file:// references need --allow-file-secrets", p)
		}
		if err := checkTenantPlaceholders(p); err != nil {
			return nil, fmt.Errorf("secret reference pattern %q: %w", p, err)
		}
	}
	if err := checkTenantPrefixes(patterns); err != nil {
		return nil, err
	}
	return &Policy{patterns: append([]string(nil), patterns...), allowFile: allowFile}, nil
}

// Patterns returns the policy's patterns.
func (p *Policy) Patterns() []string { return append([]string(nil), p.patterns...) }

// Check validates ref and checks it against the allow-list for tenant: a
// malformed ref is problem.ValidationFailed, one outside the list
// problem.SecretRefNotAllowed. Only the ref itself appears in the error.
func (p *Policy) Check(tenant, ref string) error {
	r, err := ParseRef(ref)
	if err != nil {
		return err
	}
	if r.Scheme == File && !p.allowFile {
		return problem.New(problem.SecretRefNotAllowed, "file:// secret references are not allowed on this server")
	}
	for _, pat := range p.patterns {
		if match(pat, tenant, ref) {
			return nil
		}
	}
	return problem.New(problem.SecretRefNotAllowed, "secrets_ref %s is not among the references allowed for this tenant", ref)
}

// tenantPlaceholder stands for the caller's tenant in a pattern.
const tenantPlaceholder = "{tenant}"

// isTenantChar reports whether c may appear in a tenant that {tenant}
// matches.
func isTenantChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// validTenant reports whether {tenant} may stand for tenant: a non-empty run
// of tenant characters.
func validTenant(tenant string) bool {
	if tenant == "" {
		return false
	}
	for i := 0; i < len(tenant); i++ {
		if !isTenantChar(tenant[i]) {
			return false
		}
	}
	return true
}

// checkTenantPlaceholders checks that every {tenant} of pattern comes before
// its first * and is followed by the end of the pattern or by a literal
// character that is not a tenant character.
func checkTenantPlaceholders(pattern string) error {
	star := strings.IndexByte(pattern, '*')
	for i := 0; ; {
		j := strings.Index(pattern[i:], tenantPlaceholder)
		if j < 0 {
			return nil
		}
		at := i + j
		end := at + len(tenantPlaceholder)
		if star >= 0 && at > star {
			return fmt.Errorf("%s must come before the first *", tenantPlaceholder)
		}
		if end < len(pattern) {
			next := pattern[end]
			if next == '*' || isTenantChar(next) || strings.HasPrefix(pattern[end:], tenantPlaceholder) {
				return fmt.Errorf("%s must be followed by the end of the pattern or by a character a tenant cannot contain (such as /), not %q, or one tenant could match another's references", tenantPlaceholder, pattern[end:end+1])
			}
		}
		i = end
	}
}

// checkTenantPrefixes checks that, of any two patterns with {tenant}, the
// text before the first {tenant} of one is not a proper prefix of the
// other's.
func checkTenantPrefixes(patterns []string) error {
	for _, p := range patterns {
		pi := strings.Index(p, tenantPlaceholder)
		if pi < 0 {
			continue
		}
		for _, q := range patterns {
			qi := strings.Index(q, tenantPlaceholder)
			if qi > pi && strings.HasPrefix(q, p[:pi]) {
				return fmt.Errorf("secret reference patterns %q and %q: the text before %s in the first is a prefix of that in the second, so one tenant could match another's references", p, q, tenantPlaceholder)
			}
		}
	}
	return nil
}

// match reports whether ref matches pattern, {tenant} replaced by tenant
// (literally: a tenant's characters are never wildcards) and * matching any
// run of characters. A pattern with {tenant} matches nothing for a tenant
// validTenant refuses.
func match(pattern, tenant, ref string) bool {
	if strings.Contains(pattern, tenantPlaceholder) && !validTenant(tenant) {
		return false
	}
	pieces := strings.Split(pattern, "*")
	for i, p := range pieces {
		pieces[i] = strings.ReplaceAll(p, "{tenant}", tenant)
	}
	if len(pieces) == 1 {
		return ref == pieces[0]
	}
	if !strings.HasPrefix(ref, pieces[0]) {
		return false
	}
	rest := ref[len(pieces[0]):]
	last := pieces[len(pieces)-1]
	for _, p := range pieces[1 : len(pieces)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return len(rest) >= len(last) && strings.HasSuffix(rest, last)
}
