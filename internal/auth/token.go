package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
)

// maxTokenRequest bounds the body of a token request.
const maxTokenRequest = 64 << 10

// OAuthError is an RFC 6749 §5.2 error of the token endpoint.
type OAuthError struct {
	Status      int
	Code        string
	Description string
}

func (e *OAuthError) Error() string {
	return "oauth " + e.Code + ": " + e.Description
}

func invalidRequest(desc string) *OAuthError {
	return &OAuthError{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

func invalidClient(desc string) *OAuthError {
	return &OAuthError{Status: http.StatusUnauthorized, Code: "invalid_client", Description: desc}
}

// TokenResponse is the RFC 6749 §5.1 answer of the token endpoint.
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
	// Client is the authenticated client, for the audit record; never sent.
	Client Principal `json:"-"`
}

// ClientCredentials handles POST /oauth/token, the client-credentials grant
// of RFC 6749 §4.4. The client authenticates with HTTP Basic
// (client_secret_basic) or with client_id and client_secret form fields
// (client_secret_post), not both. The optional scope parameter must be a
// subset of the client's scopes, which it defaults to. Refusals are
// *OAuthError; other errors (the store failing) are not.
func (i *Issuer) ClientCredentials(ctx context.Context, r *http.Request) (TokenResponse, error) {
	form, err := tokenForm(r)
	if err != nil {
		return TokenResponse{}, err
	}
	switch gt := form.Get("grant_type"); gt {
	case "":
		return TokenResponse{}, invalidRequest("grant_type is required")
	case "client_credentials":
	default:
		return TokenResponse{}, &OAuthError{Status: http.StatusBadRequest, Code: "unsupported_grant_type", Description: "only client_credentials is supported"}
	}
	id, secret, err := clientAuth(r, form)
	if err != nil {
		return TokenResponse{}, err
	}
	c, err := i.authenticateClient(ctx, id, secret)
	if err != nil {
		return TokenResponse{}, err
	}
	scopes := c.Scopes
	if s := form.Get("scope"); s != "" {
		requested := ParseScopes(s)
		for _, want := range requested {
			if !slices.Contains(c.Scopes, want) {
				return TokenResponse{}, &OAuthError{Status: http.StatusBadRequest, Code: "invalid_scope", Description: "the client is not allowed scope " + safeScope(want)}
			}
		}
		scopes = slices.Compact(slices.Sorted(slices.Values(requested)))
	}
	raw, err := i.Mint(ctx, MintRequest{Tenant: c.Tenant, Subject: c.ID, ClientID: c.ID, Scopes: scopes, TTL: i.ttl})
	if err != nil {
		return TokenResponse{}, fmt.Errorf("mint token: %w", err)
	}
	return TokenResponse{
		AccessToken: raw,
		TokenType:   "Bearer",
		ExpiresIn:   int64(i.ttl.Seconds()),
		Scope:       strings.Join(scopes, " "),
		Client:      Principal{Subject: c.ID, ClientID: c.ID, Tenant: c.Tenant, Scopes: scopes},
	}, nil
}

// tokenForm reads the form-encoded body of a token request. Parameters in
// the query string are ignored; a repeated parameter is an error (RFC 6749
// §3.2).
func tokenForm(r *http.Request) (url.Values, error) {
	if r.Method != http.MethodPost {
		return nil, invalidRequest("the token endpoint takes POST")
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, invalidRequest("the body must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxTokenRequest)
	if err := r.ParseForm(); err != nil {
		return nil, invalidRequest("the body is not a valid form")
	}
	for name, vs := range r.PostForm {
		if len(vs) > 1 {
			return nil, invalidRequest("parameter " + safeScope(name) + " is repeated")
		}
	}
	return r.PostForm, nil
}

// clientAuth returns the client id and secret of a token request.
func clientAuth(r *http.Request, form url.Values) (id, secret string, err error) {
	if h := r.Header.Get("Authorization"); h != "" {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return "", "", invalidClient("unsupported client authentication scheme")
		}
		if form.Has("client_secret") {
			return "", "", invalidRequest("use one client authentication method")
		}
		// RFC 6749 §2.3.1: id and secret are form-urlencoded before Basic.
		if id, err = url.QueryUnescape(user); err != nil {
			return "", "", invalidClient("malformed client id")
		}
		if secret, err = url.QueryUnescape(pass); err != nil {
			return "", "", invalidClient("malformed client secret")
		}
		if fid := form.Get("client_id"); fid != "" && fid != id {
			return "", "", invalidRequest("client_id does not match the authenticated client")
		}
	} else {
		id, secret = form.Get("client_id"), form.Get("client_secret")
	}
	if id == "" || secret == "" {
		return "", "", invalidClient("client authentication is required")
	}
	return id, secret, nil
}

// safeScope returns s when it is a plain scope token, else a placeholder,
// so descriptions never carry arbitrary input.
func safeScope(s string) string {
	if ValidScope(s) && len(s) <= 64 {
		return s
	}
	return "(invalid)"
}

// WriteTokenResponse writes the answer of the token endpoint: resp as JSON
// when err is nil, else the RFC 6749 §5.2 error. An error that is not an
// *OAuthError becomes server_error with the status of its problem code
// (500 when it has none); the caller should log it. Both are sent with
// Cache-Control: no-store.
func WriteTokenResponse(w http.ResponseWriter, resp TokenResponse, err error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	if err == nil {
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	var oe *OAuthError
	if !errors.As(err, &oe) {
		status := http.StatusInternalServerError
		var pe *problem.Error
		if errors.As(err, &pe) {
			status = problem.Status(pe.Code)
		}
		oe = &OAuthError{Status: status, Code: "server_error", Description: "the token could not be issued"}
	}
	if oe.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Basic realm="agentplane"`)
	}
	w.WriteHeader(oe.Status)
	_ = json.NewEncoder(w).Encode(struct {
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description,omitempty"`
	}{oe.Code, oe.Description})
}
