package outbound

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// credentialsKey is the context key of a request's credentials.
type credentialsKey struct{}

// credentials authenticate the requests to one origin.
type credentials struct {
	scheme, host string
	apply        func(*http.Request)
}

// WithCredentials returns ctx carrying apply, which adds credentials (a
// header, a query parameter) to every request made with the context to the
// origin (scheme and host) of target, redirects within it included; requests
// to other origins are sent without them. The innermost transport applies
// them to its own copy of each request, below tracing, so no span, error,
// response or caller ever sees a request that carries them.
func WithCredentials(ctx context.Context, target *url.URL, apply func(*http.Request)) context.Context {
	if target == nil || apply == nil {
		return ctx
	}
	return context.WithValue(ctx, credentialsKey{}, &credentials{scheme: target.Scheme, host: target.Host, apply: apply})
}

// credentialTransport applies the credentials a request's context carries.
type credentialTransport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t credentialTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c, _ := r.Context().Value(credentialsKey{}).(*credentials)
	if c == nil || !strings.EqualFold(r.URL.Scheme, c.scheme) || !strings.EqualFold(r.URL.Host, c.host) {
		return t.base.RoundTrip(r)
	}
	authed := r.Clone(r.Context()) // a RoundTripper must not change the caller's request
	c.apply(authed)
	resp, err := t.base.RoundTrip(authed)
	if resp != nil {
		resp.Request = r
	}
	return resp, err
}
