package call

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/tool"
)

// credentials add a call's authentication to each attempt.
type credentials struct {
	apply func(*http.Request)
	// token is the cache entry of an oauth2 tool, invalidated on a 401.
	token *tokenEntry
}

// context returns ctx carrying the credentials for requests to target's
// origin: the outbound client adds them beneath its tracing, so the
// request the executor builds, records and traces never holds them.
func (c *credentials) context(ctx context.Context, target *url.URL) context.Context {
	if c == nil {
		return ctx
	}
	return outbound.WithCredentials(ctx, target, c.apply)
}

// authError is an error of a call's authentication: never with the secret.
func authError(msg string, err error) error {
	if pe := problemOr(err); pe != nil {
		return pe
	}
	return &Error{Msg: "auth: " + msg, Err: err}
}

// authenticate resolves the tool's secret (the policy is checked again) and
// returns how to apply it.
func (e *Executor) authenticate(ctx context.Context, req tool.CallRequest) (*credentials, error) {
	a := req.Tool.Auth
	if a.Type == "" || a.Type == tool.AuthNone {
		return nil, nil
	}
	if a.SecretsRef == "" {
		return nil, authError("the tool's auth needs a secrets_ref", nil)
	}
	if e.opts.Secrets == nil {
		return nil, authError("no secrets resolver is configured", nil)
	}
	secret, err := e.opts.Secrets.Resolve(ctx, req.Tenant, a.SecretsRef)
	if err != nil {
		return nil, authError(err.Error(), err)
	}
	switch a.Type {
	case tool.AuthBearer:
		return &credentials{apply: func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) }}, nil
	case tool.AuthBasic:
		user, pass, ok := strings.Cut(secret, ":")
		if !ok {
			return nil, authError("the basic secret must be user:password", nil)
		}
		return &credentials{apply: func(r *http.Request) { r.SetBasicAuth(user, pass) }}, nil
	case tool.AuthAPIKey:
		if a.In == "query" {
			name := a.Name
			if name == "" {
				name = "api_key"
			}
			return &credentials{apply: func(r *http.Request) {
				q := r.URL.Query()
				q.Set(name, secret)
				r.URL.RawQuery = q.Encode()
			}}, nil
		}
		header := a.Header
		if header == "" {
			header = "X-API-Key"
		}
		return &credentials{apply: func(r *http.Request) { r.Header.Set(header, secret) }}, nil
	case tool.AuthOAuth2:
		entry := e.tokenEntry(req.Tool)
		tok, err := entry.token(ctx, e, req.Tool, secret)
		if err != nil {
			return nil, err
		}
		return &credentials{
			apply: func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok.AccessToken) },
			token: entry,
		}, nil
	default:
		return nil, authError("unknown auth type "+a.Type, nil)
	}
}

// tokenKey names a tool's revision: an update elsewhere changes the key,
// so no replica keeps using a token of the tool's old auth.
type tokenKey struct {
	tool     string
	revision int
}

// tokenEntry caches one tool revision's client-credentials token, reused
// until it expires.
type tokenEntry struct {
	mu sync.Mutex
	// fingerprint identifies the client, secret, token URL and scopes the
	// token was obtained with: a rotated secret gets a new token.
	fingerprint [32]byte
	config      *clientcredentials.Config
	tok         *oauth2.Token
}

func (e *Executor) tokenEntry(t *tool.Tool) *tokenEntry {
	k := tokenKey{tool: t.ID, revision: t.Revision}
	if te, ok := e.tokens.Get(k); ok {
		return te
	}
	te := &tokenEntry{}
	if prev, ok, _ := e.tokens.PeekOrAdd(k, te); ok {
		return prev
	}
	return te
}

func (te *tokenEntry) invalidate() {
	te.mu.Lock()
	te.tok = nil
	te.mu.Unlock()
}

// token returns the cached token, or requests one through the outbound
// client with the call's context (time-out and trace).
func (te *tokenEntry) token(ctx context.Context, e *Executor, t *tool.Tool, secret string) (*oauth2.Token, error) {
	clientID, clientSecret := t.Auth.ClientID, secret
	if strings.HasPrefix(strings.TrimSpace(secret), "{") {
		var pair struct {
			ClientID     string `json:"client_id"`
			ClientSecret string `json:"client_secret"`
		}
		if err := json.Unmarshal([]byte(secret), &pair); err != nil || pair.ClientSecret == "" {
			return nil, authError(`the oauth2 secret is not a JSON object {"client_id", "client_secret"}`, nil)
		}
		clientSecret = pair.ClientSecret
		if pair.ClientID != "" {
			clientID = pair.ClientID
		}
	}
	if clientID == "" {
		return nil, authError("oauth2 needs auth.client_id when the secret is only the client secret", nil)
	}
	tokenURL := t.Auth.TokenURL
	if tokenURL == "" {
		tokenURL = t.SpecTokenURL
	}
	if tokenURL == "" {
		return nil, authError("oauth2 needs a token URL: set auth.token_url (the spec names none)", nil)
	}
	if _, err := e.opts.Client.CheckURL(tokenURL, false); err != nil {
		return nil, err
	}
	fp := fingerprint(clientID, clientSecret, tokenURL, strings.Join(t.Auth.Scopes, " "))

	te.mu.Lock()
	defer te.mu.Unlock()
	if te.fingerprint != fp || te.config == nil {
		te.fingerprint, te.tok = fp, nil
		te.config = &clientcredentials.Config{
			ClientID:     clientID,
			ClientSecret: clientSecret,
			TokenURL:     tokenURL,
			Scopes:       t.Auth.Scopes,
		}
	}
	if te.tok.Valid() {
		return te.tok, nil
	}
	tok, err := te.config.Token(context.WithValue(ctx, oauth2.HTTPClient, e.opts.Client.HTTPClient()))
	if err != nil {
		return nil, tokenError(err, e)
	}
	te.tok = tok
	return tok, nil
}

func fingerprint(parts ...string) [32]byte {
	return sha256.Sum256([]byte(strings.Join(parts, "\x00")))
}

// tokenError says why the token request failed, without the token
// endpoint's answer (which may echo credentials).
func tokenError(err error, e *Executor) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "the token endpoint answered " + re.Response.Status
		if re.ErrorCode != "" {
			msg += " (" + re.ErrorCode + ")"
		}
		return &Error{Status: re.Response.StatusCode, Msg: "auth: " + msg}
	}
	if pe := problemOr(err); pe != nil {
		return pe
	}
	return &Error{Retryable: true, Msg: "auth: the token endpoint could not be reached: " + outbound.Reason(err, e.opts.Timeout)}
}
