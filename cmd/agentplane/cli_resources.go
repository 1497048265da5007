package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/client"
)

// addClientCommands adds the command-line client's commands to root.
func (c *cli) addClientCommands(root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: "client", Title: "Client commands (talk to a server over its API):"},
		&cobra.Group{ID: "operator", Title: "Operator commands (run on the server's machine):"})
	for _, cmd := range []*cobra.Command{c.loginCommand(), c.toolsCommand(), c.modelsCommand(), c.agentsCommand(), c.invokeCommand(),
		c.workflowsCommand(), c.usageCommand(), c.approvalsCommand(), c.replayCommand(), c.replaysCommand(), c.batchesCommand(), c.datasetsCommand(),
		c.operationsCommand(), c.auditCommand(), c.schedulesCommand(), c.webhooksCommand(), c.consoleCommand()} {
		cmd.GroupID = "client"
		root.AddCommand(cmd)
	}
}

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

func toolTable(w io.Writer, t map[string]any) error {
	vertical(w, t, "id", "name", "type", "operations", "scope_required", "base_url", "spec_url", "policy_class",
		"side_effects", "idempotency_support", "auth.type", "limits", "operation_limits", "revision", "indexed_at", "warnings")
	return nil
}

// toolID resolves a tool name to its id; an id is returned as it is.
func (c *cli) toolID(cmd *cobra.Command, ref string) (string, error) {
	if strings.HasPrefix(ref, "tool_") {
		return ref, nil
	}
	cl, err := c.client(cmd.Context())
	if err != nil {
		return "", err
	}
	cursor := ""
	for range 1000 {
		var page struct {
			Tools []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"tools"`
			Next *string `json:"next_cursor"`
		}
		if _, err := cl.JSON(cmd.Context(), client.Request{Method: http.MethodGet, Path: "/v1/tools" + query("limit", "200", "cursor", cursor)}, &page); err != nil {
			return "", err
		}
		for _, t := range page.Tools {
			if t.Name == ref {
				return t.ID, nil
			}
		}
		if page.Next == nil {
			break
		}
		cursor = *page.Next
	}
	return "", &client.Problem{Status: http.StatusNotFound, Title: "Not found", Detail: fmt.Sprintf("no tool named %q (agentplane tools list shows them)", ref)}
}

func (c *cli) toolsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "tools", Short: "Register and inspect the APIs agents may call"}
	completeTool := c.complete("/v1/tools?limit=200", "tools", "name")

	var reg struct {
		name, typ, specURL, specFile, endpoint, policy, key string
	}
	register := &cobra.Command{
		Use:   "register [FILE]",
		Short: "Register an API as a tool (from flags, or a registration file in YAML or JSON)",
		Long: `Registers an OpenAPI, GraphQL or SOAP API as a tool. The registration is the body
of POST /v1/tools (docs/tools.md): give it as a YAML or JSON file, or with flags;
flags override the file's fields.

  agentplane tools register --name payments --type openapi --spec-url https://api.example.com/openapi.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			body := map[string]any{}
			if len(a) == 1 {
				raw, err := readDocument(a[0], cmd.InOrStdin())
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, &body); err != nil {
					return usagef("%s is not a registration object: %v", a[0], err)
				}
			}
			if reg.specFile != "" {
				raw, err := readFile(reg.specFile)
				if err != nil {
					return err
				}
				body["spec"] = string(raw)
			}
			for k, v := range map[string]string{"name": reg.name, "type": reg.typ, "spec_url": reg.specURL,
				"endpoint_url": reg.endpoint, "policy_class": reg.policy} {
				if v != "" {
					body[k] = v
				}
			}
			if body["name"] == nil || body["type"] == nil {
				return usagef("a registration needs a name and a type: --name and --type openapi|graphql|soap, or a file")
			}
			_, err := c.send(cmd, http.MethodPost, "/v1/tools", body, idempotencyHeader(reg.key), toolTable)
			return err
		},
	}
	register.Flags().StringVar(&reg.name, "name", "", "tool name, ^[a-zA-Z0-9_-]{1,64}$")
	register.Flags().StringVar(&reg.typ, "type", "", "openapi, graphql or soap")
	register.Flags().StringVar(&reg.specURL, "spec-url", "", "URL of the API description the server fetches")
	register.Flags().StringVar(&reg.specFile, "spec-file", "", "a local API description sent inline")
	register.Flags().StringVar(&reg.endpoint, "endpoint-url", "", "where calls go, when not the description's")
	register.Flags().StringVar(&reg.policy, "policy-class", "", "policy class of the tool's calls (default standard)")
	register.Flags().StringVar(&reg.key, "idempotency-key", "", "Idempotency-Key of the request, to retry it safely")

	listCmd := &cobra.Command{
		Use: "list", Short: "List the tenant's tools", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.get(cmd, "/v1/tools"+query("limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")), func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "tools"), "ID\tNAME\tTYPE\tOPERATIONS\tPOLICY\tINDEXED", "id", "name", "type", "operations", "policy_class", "indexed_at")
				return nil
			})
		},
	}
	pageFlags(listCmd)

	getCmd := &cobra.Command{
		Use: "get TOOL", Short: "Show a tool (by name or id)", Args: args(1, "a tool name or id"), ValidArgsFunction: completeTool,
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := c.toolID(cmd, a[0])
			if err != nil {
				return err
			}
			return c.get(cmd, "/v1/tools/"+url.PathEscape(id), toolTable)
		},
	}

	var upd struct{ specURL, specFile string }
	update := &cobra.Command{
		Use:   "update TOOL [FILE]",
		Short: "Replace a tool's registration and index its description again",
		Long: `Sends PUT /v1/tools/{id}: the whole registration, from a YAML or JSON file, with
--spec-url or --spec-file overriding the description. Without a file, the
tool's current registration is sent again with the overrides, which re-fetches
and re-indexes the description.`,
		Args: cobra.RangeArgs(1, 2), ValidArgsFunction: completeTool,
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := c.toolID(cmd, a[0])
			if err != nil {
				return err
			}
			body := map[string]any{}
			if len(a) == 2 {
				raw, err := readDocument(a[1], cmd.InOrStdin())
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, &body); err != nil {
					return usagef("%s is not a registration object: %v", a[1], err)
				}
			} else {
				if body, err = c.currentRegistration(cmd, id); err != nil {
					return err
				}
			}
			if upd.specURL != "" {
				body["spec_url"] = upd.specURL
				delete(body, "spec")
			}
			if upd.specFile != "" {
				raw, err := readFile(upd.specFile)
				if err != nil {
					return err
				}
				body["spec"] = string(raw)
				delete(body, "spec_url")
			}
			_, err = c.send(cmd, http.MethodPut, "/v1/tools/"+url.PathEscape(id), body, nil, toolTable)
			return err
		},
	}
	update.Flags().StringVar(&upd.specURL, "spec-url", "", "URL of the new API description")
	update.Flags().StringVar(&upd.specFile, "spec-file", "", "a local API description sent inline")

	del := &cobra.Command{
		Use: "delete TOOL", Short: "Delete a tool (refused while an agent version uses it)", Args: args(1, "a tool name or id"),
		ValidArgsFunction: completeTool,
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := c.toolID(cmd, a[0])
			if err != nil {
				return err
			}
			_, err = c.send(cmd, http.MethodDelete, "/v1/tools/"+url.PathEscape(id), nil, nil, func(w io.Writer, doc map[string]any) error {
				fmt.Fprintf(w, "deleted %s\n", field(doc, "id"))
				return nil
			})
			return err
		},
	}

	var search string
	ops := &cobra.Command{
		Use: "ops TOOL", Short: "List or search a tool's operations", Args: args(1, "a tool name or id"),
		Example:           `  agentplane tools ops github --search "create issue"`,
		ValidArgsFunction: completeTool,
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := c.toolID(cmd, a[0])
			if err != nil {
				return err
			}
			return c.get(cmd, "/v1/tools/"+url.PathEscape(id)+"/operations"+query("q", search, "kind", flagString(cmd, "kind"),
				"limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")), func(w io.Writer, doc map[string]any) error {
				ops := list(doc, "operations")
				if len(ops) == 0 && search != "" {
					fmt.Fprintf(w, "no operations of %s match %q\n", a[0], search)
					return nil
				}
				rows(w, ops, "OPERATION\tKIND\tMETHOD\tPATH\tSUMMARY\tSCORE", "id", "kind", "method", "path", "summary", "score")
				return nil
			})
		},
	}
	ops.Flags().StringVar(&search, "search", "", "words to look for; results come best first")
	ops.Flags().String("kind", "", "only read or write operations")
	ops.Flags().String("limit", "", "page size (1–100, default 20)")
	ops.Flags().String("cursor", "", "next_cursor of the previous page")

	cmd.AddCommand(register, listCmd, getCmd, update, del, ops)
	return cmd
}

// currentRegistration is the registration a tool was made with, as PUT
// takes it (the read-only fields dropped).
func (c *cli) currentRegistration(cmd *cobra.Command, id string) (map[string]any, error) {
	cl, err := c.client(cmd.Context())
	if err != nil {
		return nil, err
	}
	var t map[string]any
	if _, err := cl.JSON(cmd.Context(), client.Request{Method: http.MethodGet, Path: "/v1/tools/" + url.PathEscape(id)}, &t); err != nil {
		return nil, err
	}
	body := map[string]any{}
	for _, k := range []string{"name", "type", "spec_url", "endpoint_url", "policy_class", "side_effects", "idempotency_support",
		"limits", "operation_limits"} {
		if v, ok := t[k]; ok && v != nil {
			body[k] = v
		}
	}
	if auth, ok := t["auth"].(map[string]any); ok {
		body["auth"] = auth
	}
	if body["spec_url"] == nil {
		return nil, usagef("tool %s was registered with an inline spec: give the registration file, or --spec-file", id)
	}
	return body, nil
}

func pageFlags(cmd *cobra.Command) {
	cmd.Flags().String("limit", "", "page size (1–200, default 50)")
	cmd.Flags().String("cursor", "", "next_cursor of the previous page")
}

func flagString(cmd *cobra.Command, name string) string {
	v, _ := cmd.Flags().GetString(name)
	return v
}

func idempotencyHeader(key string) http.Header {
	if key == "" {
		return nil
	}
	return http.Header{"Idempotency-Key": {key}}
}

func versionTable(w io.Writer, v map[string]any) error {
	vertical(w, v, "ref", "description", "default", "tools", "deployed_at")
	return nil
}

func (c *cli) agentsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Deploy agent versions, choose the default and archive them"}
	completeAgent := c.complete("/v1/agents?limit=200", "agents", "name")

	var promote bool
	var key, name, version string
	deploy := &cobra.Command{
		Use:   "deploy FILE",
		Short: "Deploy an agent version from a YAML or JSON file",
		Long: `Deploys the agent version a file describes: the body of POST /v1/agents, that is
name, optional version and description, and the definition (docs/agents.md).
The file may also be a bare definition (tools, steps, outcome, …) with --name,
or what agents get -o yaml printed, edited: its read-only fields are left
out, with a note. --name and --version set or override the name and the
version (without one, the server numbers the version). - reads standard input.`,
		Example: `  agentplane agents deploy fraud-triage.yaml
  agentplane agents deploy definition.yaml --name fraud-triage
  agentplane agents get fraud-triage -o yaml > v.yaml && $EDITOR v.yaml && agentplane agents deploy v.yaml`,
		Args: args(1, "a file (YAML or JSON, - for standard input)"),
		RunE: func(cmd *cobra.Command, a []string) error {
			raw, err := readDocument(a[0], cmd.InOrStdin())
			if err != nil {
				return err
			}
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				return usagef("%s is not an agent deployment object: %v", a[0], err)
			}
			body, notes, err := deployment(doc, name, version)
			if err != nil {
				return usagef("%s: %v", a[0], err)
			}
			for _, n := range notes {
				fmt.Fprintf(c.stderr, "note: %s\n", n)
			}
			if promote {
				body["promote"] = true
			}
			_, err = c.send(cmd, http.MethodPost, "/v1/agents", body, idempotencyHeader(key), versionTable)
			return err
		},
	}
	deploy.Flags().BoolVar(&promote, "promote", false, "make the new version the default at once")
	deploy.Flags().StringVar(&name, "name", "", "the agent's name (required for a bare definition; overrides the file's)")
	deploy.Flags().StringVar(&version, "version", "", "the version to deploy (default: the file's, else the next number)")
	deploy.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key of the request, to retry it safely")

	listCmd := &cobra.Command{
		Use: "list", Short: "List the tenant's agents", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			archived := ""
			if all, _ := cmd.Flags().GetBool("archived"); all {
				archived = "true"
			}
			return c.get(cmd, "/v1/agents"+query("limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor"), "archived", archived), func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "agents"), "NAME\tDEFAULT\tLATEST\tVERSIONS\tUPDATED\tARCHIVED", "name", "default_version", "latest_version", "versions", "updated_at", "archived_at")
				return nil
			})
		},
	}
	pageFlags(listCmd)
	listCmd.Flags().Bool("archived", false, "list archived agents too")

	getCmd := &cobra.Command{
		Use: "get AGENT[@VERSION]", Short: "Show an agent and its default version, or one version", Args: args(1, "an agent name, or name@version"),
		ValidArgsFunction: completeAgent,
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.get(cmd, "/v1/agents/"+url.PathEscape(a[0]), func(w io.Writer, doc map[string]any) error {
				if d, ok := doc["default"].(map[string]any); ok {
					// The description of the version that runs: the default's,
					// not the newest version's.
					vertical(w, map[string]any{"name": doc["name"], "description": d["description"]}, "name", "description")
					vertical(w, doc, "default_version", "latest_version", "versions", "created_at", "updated_at")
					vertical(w, map[string]any{"default": d}, "default.tools", "default.deployed_at")
					return nil
				}
				return versionTable(w, doc)
			})
		},
	}

	versions := &cobra.Command{
		Use: "versions AGENT", Short: "List an agent's versions", Args: args(1, "an agent name"), ValidArgsFunction: completeAgent,
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.get(cmd, "/v1/agents/"+url.PathEscape(a[0])+"/versions"+query("limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")), func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "versions"), "VERSION\tDEFAULT\tTOOLS\tDEPLOYED\tARCHIVED\tDESCRIPTION", "version", "default", "tools", "deployed_at", "archived_at", "description")
				return nil
			})
		},
	}
	pageFlags(versions)

	promoteCmd := &cobra.Command{
		Use: "promote AGENT@VERSION", Short: "Make a version the agent's default", Args: args(1, "name@version"),
		ValidArgsFunction: completeAgent,
		RunE: func(cmd *cobra.Command, a []string) error {
			name, v, ok := strings.Cut(a[0], "@")
			if !ok || name == "" || v == "" {
				return usagef("%q is not name@version, e.g. fraud-triage@2", a[0])
			}
			_, err := c.send(cmd, http.MethodPut, "/v1/agents/"+url.PathEscape(name)+"/default", map[string]string{"version": v}, nil,
				func(w io.Writer, doc map[string]any) error {
					fmt.Fprintf(w, "%s now runs %s@%s by default\n", name, name, field(doc, "default_version"))
					return nil
				})
			return err
		},
	}
	archiveCmd := &cobra.Command{
		Use:   "archive AGENT[@VERSION]",
		Short: "Archive a version, or every version of an agent: its history stays, it can no longer run",
		Long: `Archives a version (AGENT@VERSION) or the whole agent (AGENT): it can no longer
be invoked or replayed against, its workflows and replays stay readable, and
it no longer holds its tools and models, which can then be deleted. Refused
for the default version, while a workflow of it is running or waiting, and
while a schedule invokes it (docs/agents.md).`,
		Args: args(1, "an agent name, or name@version"), ValidArgsFunction: completeAgent,
		RunE: func(cmd *cobra.Command, a []string) error {
			_, err := c.send(cmd, http.MethodDelete, "/v1/agents/"+url.PathEscape(a[0]), nil, nil,
				func(w io.Writer, doc map[string]any) error {
					if n := field(doc, "versions_archived"); n != "" {
						fmt.Fprintf(w, "archived agent %s (%s versions archived now)\n", field(doc, "name"), n)
						return nil
					}
					fmt.Fprintf(w, "archived %s\n", field(doc, "ref"))
					return nil
				})
			return err
		},
	}
	cardCmd := &cobra.Command{
		Use: "card AGENT", Short: "Print the A2A agent card of an agent's default version", Args: args(1, "an agent name"),
		ValidArgsFunction: completeAgent,
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.get(cmd, "/a2a/"+url.PathEscape(a[0])+"/.well-known/agent-card.json", func(w io.Writer, doc map[string]any) error {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(doc)
			})
		},
	}
	cmd.AddCommand(deploy, listCmd, getCmd, versions, promoteCmd, archiveCmd, cardCmd)
	return cmd
}

func (c *cli) auditCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Query, verify and export the tenant's audit log"}
	// The filters of GET /v1/audit/query, each with its own help.
	filters := []struct{ name, help string }{
		{"actor", "only records of this subject (a person's sub, or a client's id)"},
		{"action", "only records of this action, e.g. workflow.replay (docs/audit.md lists them)"},
		{"resource_type", "only records about this kind of resource: tool, agent, workflow, replay, …"},
		{"resource_id", "only records about this resource, e.g. a workflow or tool id"},
		{"workflow_id", "only records of this workflow: its requests, steps, tool calls and end"},
		{"outcome", "only records with this outcome: success, denied or error"},
		{"trace_id", "only records of this trace (the trace_id of a response or log line)"},
		{"cursor", "the next_cursor of the page before, for the page after it"},
	}
	since, until := newTimeFlag(time.Now), newTimeFlag(time.Now)
	q := &cobra.Command{
		Use: "query", Short: "List audit records, newest first", Args: args(0, "no arguments"),
		Example: `  agentplane audit query --action workflow.replay --since 2026-11-01T00:00:00Z
  agentplane audit query --workflow-id wf_01JD… --since 24h`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kv := []string{"since", since.RFC3339(), "until", until.RFC3339(), "limit", flagString(cmd, "limit")}
			for _, f := range filters {
				kv = append(kv, f.name, flagString(cmd, strings.ReplaceAll(f.name, "_", "-")))
			}
			return c.get(cmd, "/v1/audit/query"+query(kv...), func(w io.Writer, doc map[string]any) error {
				recs := list(doc, "records")
				for _, r := range recs {
					if field(r, "status") == "0" { // a record of no HTTP request
						delete(r, "status")
					}
				}
				rows(w, recs, "SEQ\tTIME\tACTOR\tACTION\tRESOURCE\tOUTCOME\tSTATUS",
					"seq", "time", "actor.sub", "action", "resource.id", "outcome", "status")
				return nil
			})
		},
	}
	for _, f := range filters {
		q.Flags().String(strings.ReplaceAll(f.name, "_", "-"), "", f.help)
	}
	q.Flags().Var(since, "since", "only records from this time on: RFC 3339, or a duration before now (24h, 7d)")
	q.Flags().Var(until, "until", "only records before this time: RFC 3339, or a duration before now")
	q.Flags().String("limit", "", "records per page, at most 1000 (server default 100)")
	verify := &cobra.Command{
		Use: "verify", Short: "Check the tenant's audit hash chain end to end", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			resp, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodGet, Path: "/v1/audit/verify"})
			if err != nil {
				return err
			}
			var rep struct {
				OK          bool   `json:"ok"`
				Checked     int64  `json:"records_checked"`
				FirstBadSeq *int64 `json:"first_bad_seq"`
			}
			if err := json.Unmarshal(resp.Body, &rep); err != nil {
				return err
			}
			if err := c.show(resp.Body, func(w io.Writer, doc map[string]any) error {
				if rep.OK {
					fmt.Fprintf(w, "ok: %d records, the chain is intact\n", rep.Checked)
				} else {
					fmt.Fprintf(w, "BROKEN: the chain breaks at seq %s after %d records\n", field(doc, "first_bad_seq"), rep.Checked)
				}
				return nil
			}); err != nil {
				return err
			}
			if !rep.OK {
				return exitError{code: exitOther, msg: "the audit chain does not verify"}
			}
			return nil
		},
	}
	cmd.AddCommand(q, verify, c.auditExportCommand())
	return cmd
}

// exitError ends the command with a code and a message, having printed its result.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }
func (e exitError) ExitCode() int { return e.code }

// readOnlyFields are the members agents get shows that a deployment does
// not take; any other member is sent on, so the server refuses a typo.
var readOnlyFields = map[string]bool{"id": true, "ref": true, "default": true, "tools": true, "deployed_at": true,
	"default_version": true, "latest_version": true, "versions": true, "created_at": true, "updated_at": true}

// deployment turns what an agents deploy file holds into the body of POST
// /v1/agents: a deployment as it is; a bare definition (it has steps) with
// --name; an agent version or an agent as agents get printed it, less its
// read-only fields, which notes name. name and version, when set, win.
func deployment(doc map[string]any, name, version string) (map[string]any, []string, error) {
	var notes []string
	if def, ok := doc["default"].(map[string]any); ok {
		// An agent with its default version (agents get NAME): deploy
		// that version's definition, edited or not.
		notes = append(notes, fmt.Sprintf("deploying the definition of %s's default version %v", field(doc, "name"), def["version"]))
		doc = def
	}
	if _, bare := doc["steps"]; bare && doc["definition"] == nil {
		if name == "" {
			return nil, nil, fmt.Errorf("this is a bare definition: name its agent with --name, or wrap it as {name: …, definition: {tools: …, steps: …}}")
		}
		doc = map[string]any{"definition": doc}
	}
	body := map[string]any{}
	var dropped []string
	for k, v := range doc {
		if readOnlyFields[k] {
			dropped = append(dropped, k)
		} else {
			body[k] = v
		}
	}
	if len(dropped) > 0 {
		slices.Sort(dropped)
		notes = append(notes, "left out the read-only fields "+strings.Join(dropped, ", "))
		// A version read back is deployed already: the edited copy gets
		// the next number unless --version names one.
		if _, read := doc["deployed_at"]; read && version == "" {
			if v, ok := body["version"]; ok {
				notes = append(notes, fmt.Sprintf("version %v is deployed already: the server numbers the new one (--version chooses)", v))
				delete(body, "version")
			}
		}
	}
	if name != "" {
		body["name"] = name
	}
	if version != "" {
		body["version"] = version
	}
	if body["definition"] == nil {
		return nil, nil, fmt.Errorf("no definition: the file needs {name: …, definition: {tools: …, steps: …}} (docs/agents.md), or a bare definition with --name")
	}
	return body, notes, nil
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
