// Package oidctest is an OpenID provider on loopback for tests: it
// implements the authorization code flow with PKCE for one confidential
// client, and signs access tokens the way an external issuer of agentplane
// does (audience "agentplane", the tenant in "tenant", scopes in "scope").
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Options are whom the provider signs in and how it misbehaves; change
// them with Configure.
type Options struct {
	// Redirect is the client's registered redirect URI.
	Redirect string
	// Subject, Tenant and Scope are whom the next sign-in is for.
	Subject, Tenant, Scope string
	// IDAudience, when set, is the ID token's audience instead of the client.
	IDAudience string
	// WrongChallenge has /authorize record another challenge than the one
	// sent, so that /token refuses the client's verifier.
	WrongChallenge bool
	// WrongNonce signs ID tokens with another nonce than the one asked for.
	WrongNonce bool
	// Deny answers /authorize with error=access_denied.
	Deny bool
	// NoAccessSubject signs access tokens without a sub claim (the ID
	// token keeps its own).
	NoAccessSubject bool
	// AccessTTL is the access token's lifetime.
	AccessTTL time.Duration
}

// Provider serves discovery, a JWKS, /authorize (which consents at once
// and redirects back with a code) and /token (which checks the client
// secret, the redirect URI and the code verifier against the challenge,
// then signs an ID token and an access token).
type Provider struct {
	// URL is the issuer.
	URL                    string
	ClientID, ClientSecret string

	t   testing.TB
	key *rsa.PrivateKey

	mu       sync.Mutex
	opts     Options
	codes    map[string]pending
	lastExp  time.Time
	redeemed int
}

type pending struct{ challenge, nonce, redirect string }

// New starts a provider for the client "agentplane-console" that signs in
// carol of tenant acme with workflows:read and agents:read.
func New(t testing.TB) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{t: t, key: key, ClientID: "agentplane-console", ClientSecret: "console-s3cret", codes: map[string]pending{},
		opts: Options{Subject: "carol", Tenant: "acme", Scope: "workflows:read agents:read", AccessTTL: time.Hour}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		u := p.URL
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token", "jwks_uri": u + "/jwks",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Configure changes the provider's options.
func (p *Provider) Configure(f func(*Options)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.opts)
}

// LastAccessExpiry is the exp of the access token /token signed last.
func (p *Provider) LastAccessExpiry() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastExp
}

// Redeemed counts the codes /token exchanged.
func (p *Provider) Redeemed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.redeemed
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	defer p.mu.Unlock()
	bad := ""
	switch {
	case q.Get("client_id") != p.ClientID:
		bad = "unknown client_id"
	case q.Get("redirect_uri") != p.opts.Redirect:
		bad = "redirect_uri is not registered: " + q.Get("redirect_uri")
	case q.Get("response_type") != "code":
		bad = "response_type must be code"
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		bad = "a S256 code_challenge is required"
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		bad = "scope must include openid"
	case q.Get("state") == "" || q.Get("nonce") == "":
		bad = "state and nonce are required"
	}
	if bad != "" { // never redirect to an unverified redirect URI
		http.Error(w, bad, http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(p.opts.Redirect)
	v := url.Values{"state": {q.Get("state")}}
	if p.opts.Deny {
		v.Set("error", "access_denied")
		v.Set("error_description", "the user declined")
	} else {
		code := randomHex(p.t)
		challenge := q.Get("code_challenge")
		if p.opts.WrongChallenge {
			challenge = S256(randomHex(p.t))
		}
		p.codes[code] = pending{challenge: challenge, nonce: q.Get("nonce"), redirect: q.Get("redirect_uri")}
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, desc string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok { // RFC 6749 §2.3.1: form-encoded before base64
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != p.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(p.ClientSecret)) != 1 {
		fail(http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	code := r.PostForm.Get("code")
	pc, found := p.codes[code]
	delete(p.codes, code)
	switch {
	case r.PostForm.Get("grant_type") != "authorization_code":
		fail(http.StatusBadRequest, "unsupported_grant_type", "only authorization_code")
	case !found:
		fail(http.StatusBadRequest, "invalid_grant", "unknown or used code")
	case r.PostForm.Get("redirect_uri") != pc.redirect:
		fail(http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
	case S256(r.PostForm.Get("code_verifier")) != pc.challenge:
		fail(http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge")
	default:
		now := time.Now()
		aud := p.ClientID
		if p.opts.IDAudience != "" {
			aud = p.opts.IDAudience
		}
		nonce := pc.nonce
		if p.opts.WrongNonce {
			nonce = randomHex(p.t)
		}
		p.redeemed++
		p.lastExp = now.Add(p.opts.AccessTTL).Truncate(time.Second)
		idToken := p.sign(map[string]any{"iss": p.URL, "sub": p.opts.Subject, "aud": aud, "nonce": nonce,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}, "JWT")
		claims := map[string]any{"iss": p.URL, "sub": p.opts.Subject, "aud": "agentplane", "tenant": p.opts.Tenant,
			"scope": p.opts.Scope, "client_id": p.ClientID, "iat": now.Unix(), "exp": p.lastExp.Unix()}
		if p.opts.NoAccessSubject {
			delete(claims, "sub")
		}
		access := p.sign(claims, "at+jwt")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": access, "id_token": idToken, "token_type": "Bearer",
			"expires_in": int(p.opts.AccessTTL.Seconds())})
	}
}

// AccessToken signs an access token of subject in tenant with scope, valid
// for a minute, as /token would.
func (p *Provider) AccessToken(subject, tenant, scope string) string {
	return p.sign(map[string]any{"iss": p.URL, "sub": subject, "aud": "agentplane", "tenant": tenant, "scope": scope,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Minute).Unix()}, "at+jwt")
}

func (p *Provider) sign(claims map[string]any, typ string) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: p.key, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		p.t.Error(err)
		return ""
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		p.t.Error(err)
	}
	return raw
}

// S256 is the PKCE challenge of verifier (RFC 7636 §4.2).
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func randomHex(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Error(err)
	}
	return hex.EncodeToString(b)
}
