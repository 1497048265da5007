package httpapi

import (
	"errors"
	"net/http"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

var errNoIssuer = problem.New(problem.NotFound, "the embedded issuer is off: tokens come from the configured external issuer")

func handleDiscovery(iss *auth.Issuer) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if iss == nil {
			return errNoIssuer
		}
		return frontdoor.WriteJSON(w, http.StatusOK, iss.Discovery())
	}
}

func handleJWKS(iss *auth.Issuer) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if iss == nil {
			return errNoIssuer
		}
		set, err := iss.JWKS(r.Context())
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		return frontdoor.WriteJSON(w, http.StatusOK, set)
	}
}

// handleToken is the client-credentials grant. Its errors are RFC 6749 JSON
// errors, not problem documents, because OAuth clients expect that shape.
func handleToken(iss *auth.Issuer) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if iss == nil {
			return errNoIssuer
		}
		resp, err := iss.ClientCredentials(r.Context(), r)
		info := frontdoor.InfoFrom(r.Context())
		if err == nil {
			info.Principal, info.ResourceID = &resp.Client, resp.Client.ClientID
		} else if oe := (*auth.OAuthError)(nil); !errors.As(err, &oe) {
			info.Problem = problem.As(err) // logged with its cause
		}
		auth.WriteTokenResponse(w, resp, err)
		return nil
	}
}
