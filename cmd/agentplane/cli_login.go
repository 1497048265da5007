package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentplane/agentplane/internal/client"
	"github.com/spf13/cobra"
)

func (c *cli) loginCommand() *cobra.Command {
	var clientID, secret, scope string
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Store the server URL and a token in the client's configuration file",
		Long: `Stores the server URL and an access token in the configuration file (--config),
so later commands need neither --url nor --token.

With --client-id and --client-secret (or AGENTPLANE_CLIENT_ID and
AGENTPLANE_CLIENT_SECRET) it asks the server for a token with the OAuth 2.0
client-credentials grant and keeps the client's credentials to get a new token
when it expires. With --token it stores that token as it is (without --url or
AGENTPLANE_URL, the server is the token's issuer), for example one minted for a
local server:

  agentplane login --token "$(agentplane token --tenant acme --scope 'tools:read tools:write agents:read agents:write agents:invoke workflows:read workflows:replay audit:read tool:*')"

The file is written with mode 0600.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			clientID, secret = first(clientID, c.getenv("AGENTPLANE_CLIENT_ID")), first(secret, c.getenv("AGENTPLANE_CLIENT_SECRET"))
			cfg := config{URL: cl.BaseURL}
			switch {
			case clientID != "" && secret != "":
				tok, exp, err := cl.ClientCredentials(cmd.Context(), clientID, secret, scope)
				if err != nil {
					return err
				}
				cfg.Token, cfg.Expires, cfg.ClientID, cfg.ClientSecret, cfg.Scope = tok, exp, clientID, secret, scope
			case clientID != "" || secret != "":
				return usagef("give both --client-id and --client-secret")
			case cl.Token != "":
				cfg.Token = cl.Token
				// No URL given anywhere: the server that issued the token.
				if first(c.url, c.getenv("AGENTPLANE_URL")) == "" {
					if iss := tokenIssuer(cl.Token); iss != "" {
						cl.BaseURL, cfg.URL = iss, iss
					}
				}
			default:
				return usagef("give --client-id and --client-secret, or --token (agentplane login --help shows how to mint one)")
			}
			// Check the token before keeping it.
			cl.Token = cfg.Token
			if _, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodGet, Path: "/v1/agents?limit=1"}); err != nil {
				if p, ok := err.(*client.Problem); !ok || p.Status == http.StatusUnauthorized {
					return err
				}
			}
			path, err := c.saveConfig(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "logged in to %s; configuration in %s\n", cfg.URL, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&clientID, "client-id", "", "OAuth client id (agentplane clients create makes one) [$AGENTPLANE_CLIENT_ID]")
	cmd.Flags().StringVar(&secret, "client-secret", "", "OAuth client secret [$AGENTPLANE_CLIENT_SECRET]")
	cmd.Flags().StringVar(&scope, "scope", "", "scopes to ask for (default: all the client may have)")
	return cmd
}

// tokenIssuer is the http(s) issuer (iss) a JWT names, read without
// verifying it (the server checks the token); "" when it names none.
func tokenIssuer(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	u, err := url.Parse(claims.Iss)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return strings.TrimSuffix(claims.Iss, "/")
}
