package outbound

import (
	"context"
	"net/url"

	"github.com/agentplane/agentplane/internal/problem"
)

// ReceiverRule is the address rule of a URL the server is given now and
// sends something secret to later: a webhook's receiver (signed events),
// an external agent (its run's gateway token). Plain http goes only to a
// host the operator allows; a host name is looked up now and refused when
// it resolves to a private address.
type ReceiverRule struct {
	// CheckHost checks a URL against the address policy, its host name
	// looked up (Client.CheckHost); nil checks no address.
	CheckHost func(ctx context.Context, raw string) error
	// AllowHTTP allows http:// URLs to any host (--allow-private-networks);
	// otherwise https is required, except for the hosts HTTPHost accepts
	// (--allow-private-host entries: Client.IsAllowedHost).
	AllowHTTP bool
	HTTPHost  func(raw string) bool
}

// Check refuses raw's scheme or address with problem.URLNotAllowed, its
// detail starting with field ("url: scheme \"gopher\" is not allowed: use
// https"). The URL's form (absolute, without credentials) is the caller's
// to check.
func (r ReceiverRule) Check(ctx context.Context, field, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return problem.New(problem.URLNotAllowed, "%s: the URL cannot be parsed", field)
	case u.Scheme != "https" && u.Scheme != "http":
		return problem.New(problem.URLNotAllowed, "%s: scheme %q is not allowed: use https", field, u.Scheme)
	case u.Scheme == "http" && !r.AllowHTTP && (r.HTTPHost == nil || !r.HTTPHost(raw)):
		return problem.New(problem.URLNotAllowed, "%s: http is allowed only to a host the server allows with --allow-private-host: use https", field)
	case r.CheckHost != nil:
		if err := r.CheckHost(ctx, raw); err != nil {
			if problem.Is(err, problem.URLNotAllowed) {
				return problem.New(problem.URLNotAllowed, "%s: %s", field, problem.As(err).Detail)
			}
			return err
		}
	}
	return nil
}
