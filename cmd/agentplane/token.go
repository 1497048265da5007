package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/ids"
)

// issuerFlags name the embedded issuer as the server does.
type issuerFlags struct {
	publicURL string
	addr      string
}

func (f *issuerFlags) issuerURL() string {
	if f.publicURL != "" {
		return strings.TrimRight(f.publicURL, "/")
	}
	return "http://" + f.addr
}

// issuerFile, in the data directory, holds the issuer URL the last server
// started on it used, so token agrees with serve without --addr again.
const issuerFile = "issuer"

// recordIssuer writes the embedded issuer's URL into the data directory.
func recordIssuer(data, issuer string) error {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(data, issuerFile), []byte(issuer+"\n"), 0o600)
}

// recordedIssuer is the issuer the last server on data used, or "".
func recordedIssuer(data string) string {
	raw, err := os.ReadFile(filepath.Join(data, issuerFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

func newTokenCommand(getenv func(string) string, stdout io.Writer) *cobra.Command {
	var (
		sf     storeFlags
		issf   issuerFlags
		tenant string
		scope  string
		sub    string
		ttl    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token --tenant T --scope \"a b\" [--sub S] [--ttl 1h]",
		Short: "Print an access token signed by the embedded issuer",
		Long: `Mints an access token from the embedded issuer's signing key, for local use
and scripts. It prints only the token. Use the same --data or --database-url as
the server, and the same --public-url (or --addr) so the token's issuer matches.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tenant == "" {
				return fmt.Errorf("--tenant is required")
			}
			if ttl <= 0 || ttl > 30*24*time.Hour {
				return fmt.Errorf("--ttl must be between 1s and 720h")
			}
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			issuer := issf.issuerURL()
			explicit := cmd.Flags().Changed("addr") || cmd.Flags().Changed("public-url") ||
				getenv(envName("addr")) != "" || getenv(envName("public-url")) != ""
			if rec := recordedIssuer(sf.data); !explicit && sf.databaseURL == "" && rec != "" {
				issuer = rec // the server's own, as it last started on this data directory
			}
			iss, err := auth.NewIssuer(ctx, st, issuer, time.Now)
			if err != nil {
				return err
			}
			if sub == "" {
				sub = "cli"
			}
			tok, err := iss.Mint(ctx, auth.MintRequest{Tenant: tenant, Subject: sub, Scopes: auth.ParseScopes(scope), TTL: ttl})
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, tok)
			return nil
		},
	}
	sf.register(cmd.Flags())
	cmd.Flags().StringVar(&issf.publicURL, "public-url", "", "public base URL of the server (the token's issuer)")
	cmd.Flags().StringVar(&issf.addr, "addr", "127.0.0.1:8080", "server address, the issuer when --public-url is unset (default: the issuer the last server on --data used)")
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the token acts for (required)")
	cmd.Flags().StringVar(&scope, "scope", "", `space-separated scopes, e.g. "tools:read tools:write tool:*"`)
	cmd.Flags().StringVar(&sub, "sub", "", "subject of the token (default \"cli\")")
	cmd.Flags().DurationVar(&ttl, "ttl", time.Hour, "lifetime of the token")
	bindEnv(cmd, getenv)
	return cmd
}

func newClientsCommand(getenv func(string) string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clients",
		Short: "Manage OAuth clients of the embedded issuer",
	}
	var (
		sf     storeFlags
		tenant string
		scope  string
		name   string
	)
	create := &cobra.Command{
		Use:   "create --tenant T --scope \"a b\" [--name N]",
		Short: "Create a client for the client-credentials grant and print its id and secret",
		Long: `Creates an OAuth client that obtains tokens from POST /oauth/token with the
client-credentials grant. The secret is printed once and stored only as a hash.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tenant == "" {
				return fmt.Errorf("--tenant is required")
			}
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			rec := &audit.Record{
				Time: time.Now(), Tenant: tenant, Actor: audit.Actor{Sub: "cli"},
				Action: "client.create", Resource: audit.Resource{Type: "client"},
				Outcome: audit.Success, RequestID: ids.New(ids.Request),
			}
			id, secret, err := auth.CreateClient(ctx, st, tenant, name, auth.ParseScopes(scope), rec)
			if err != nil {
				return err
			}
			switch out, _ := cmd.Flags().GetString("output"); out {
			case "env":
				fmt.Fprintf(stdout, "CLIENT_ID=%s\nCLIENT_SECRET=%s\n", id, secret)
			case "json":
				return json.NewEncoder(stdout).Encode(map[string]string{"client_id": id, "client_secret": secret})
			case "table", "":
				fmt.Fprintf(stdout, "client_id: %s\nclient_secret: %s\n", id, secret)
			default:
				return usagef("-o %q: clients create prints table, env or json", out)
			}
			return nil
		},
	}
	sf.register(create.Flags())
	create.Flags().StringVar(&tenant, "tenant", "", "tenant the client's tokens act for (required)")
	create.Flags().StringVar(&scope, "scope", "", "space-separated scopes the client may request")
	create.Flags().StringVar(&name, "name", "", "a name to recognise the client by")
	create.Example = `  eval "$(agentplane clients create --tenant acme --scope 'tools:read agents:invoke' -o env)"   # sets CLIENT_ID and CLIENT_SECRET`
	bindEnv(create, getenv)
	cmd.AddCommand(create, newClientsListCommand(getenv, stdout), newClientsRevokeCommand(getenv, stdout))
	return cmd
}

// clientView is a client as clients list and revoke print it: never its
// secret or the secret's hash.
type clientView struct {
	ClientID  string   `json:"client_id"`
	Tenant    string   `json:"tenant"`
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	CreatedAt string   `json:"created_at"`
	RevokedAt *string  `json:"revoked_at"`
}

func viewClient(c auth.Client) clientView {
	v := clientView{ClientID: c.ID, Tenant: c.Tenant, Name: c.Name, Scopes: c.Scopes,
		CreatedAt: c.CreatedAt.UTC().Format(time.RFC3339)}
	if c.RevokedAt != nil {
		at := c.RevokedAt.UTC().Format(time.RFC3339)
		v.RevokedAt = &at
	}
	return v
}

// printClients prints clients as a table or, with -o json, as {clients: [...]}.
func printClients(cmd *cobra.Command, stdout io.Writer, cs []auth.Client) error {
	views := make([]clientView, len(cs))
	for i, c := range cs {
		views[i] = viewClient(c)
	}
	switch out, _ := cmd.Flags().GetString("output"); out {
	case "json":
		return json.NewEncoder(stdout).Encode(map[string]any{"clients": views})
	case "table", "":
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLIENT_ID\tTENANT\tNAME\tSCOPES\tCREATED\tREVOKED")
		for _, v := range views {
			revoked := "-"
			if v.RevokedAt != nil {
				revoked = *v.RevokedAt
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.ClientID, v.Tenant, v.Name, strings.Join(v.Scopes, " "), v.CreatedAt, revoked)
		}
		return tw.Flush()
	default:
		return usagef("-o %q: clients list and revoke print table or json", out)
	}
}

func newClientsListCommand(getenv func(string) string, stdout io.Writer) *cobra.Command {
	var (
		sf     storeFlags
		tenant string
	)
	list := &cobra.Command{
		Use:   "list [--tenant T]",
		Short: "List OAuth clients with their tenant, scopes, creation and revocation (never secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			cs, err := st.ListClients(ctx, tenant)
			if err != nil {
				return err
			}
			return printClients(cmd, stdout, cs)
		},
	}
	sf.register(list.Flags())
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's clients (default: every tenant's)")
	bindEnv(list, getenv)
	return list
}

func newClientsRevokeCommand(getenv func(string) string, stdout io.Writer) *cobra.Command {
	var sf storeFlags
	revoke := &cobra.Command{
		Use:   "revoke CLIENT_ID",
		Short: "Revoke a client: it gets no new token and its tokens stop working within 30 s",
		Long: `Adds the client to the revocation list in the store. The token endpoint refuses
it at once (invalid_client); every replica refuses its unexpired tokens (401)
once its copy of the list is older than --revocation-ttl (30 s at most).
Revoking a revoked client changes nothing. The revocation is audited
(client.revoke) in the client's tenant's chain.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("clients revoke takes one CLIENT_ID (agentplane clients list shows them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			rec := &audit.Record{
				Time: time.Now(), Actor: audit.Actor{Sub: "cli"},
				Action: "client.revoke", Resource: audit.Resource{Type: "client", ID: args[0]},
				Outcome: audit.Success, RequestID: ids.New(ids.Request),
			}
			c, err := auth.RevokeClient(ctx, st, args[0], time.Now(), rec)
			if err != nil {
				return err
			}
			return printClients(cmd, stdout, []auth.Client{c})
		},
	}
	sf.register(revoke.Flags())
	revoke.Example = `  agentplane clients revoke cl_01J0EXAMPLE   # exit code 3 when there is no such client`
	bindEnv(revoke, getenv)
	return revoke
}

func newKeysCommand(getenv func(string) string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage the embedded issuer's signing keys",
	}
	var sf storeFlags
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Make a new signing key current; the previous one stays published",
		Long: `Adds a new signing key. New tokens are signed with it; tokens signed with the
previous key keep verifying, because the JWKS publishes the current and the
previous key. Every replica picks the new key up from the shared store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			kid, err := auth.RotateKey(ctx, st, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "current key: %s\n", kid)
			return nil
		},
	}
	sf.register(rotate.Flags())
	bindEnv(rotate, getenv)
	cmd.AddCommand(rotate)
	return cmd
}
