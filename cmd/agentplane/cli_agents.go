package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func versionTable(w io.Writer, v map[string]any) error {
	vertical(w, v, "ref", "description", "default", "tools", "deployed_at")
	externalTable(w, v)
	return nil
}

// externalTable writes what an external version's block says, when the
// version v is one: where it runs and its bounds, then what its gateway
// allows (models, policies, approvals, limits). Tools are the version's.
func externalTable(w io.Writer, v map[string]any) {
	x, ok := v["external"].(map[string]any)
	if !ok {
		return
	}
	line := func(k, val string) {
		if val != "" {
			fmt.Fprintf(w, "%s:\t%s\n", k, val)
		}
	}
	line("url", field(x, "url"))
	if t := field(x, "auth.type"); t != "" && t != "none" {
		auth := t + ", secret " + field(x, "auth.secrets_ref")
		if h := field(x, "auth.header"); h != "" {
			auth += " in " + h
		}
		line("auth", auth)
	}
	line("timeout", orDefault(field(x, "timeout"), "10m (default)"))
	line("max_attempts", orDefault(field(x, "max_attempts"), "3 (default)"))
	line("max_concurrency", field(x, "max_concurrency"))
	line("operations", field(x, "operations"))
	line("models", field(x, "models"))
	policies, _ := x["policies"].(map[string]any)
	for _, class := range slices.Sorted(maps.Keys(policies)) {
		line("policies."+class, "allow "+field(policies, class+".allow"))
	}
	approvals := list(x, "approvals")
	if len(approvals) > 0 {
		line("approvals", strconv.Itoa(len(approvals)))
	}
	for i, a := range approvals {
		when := field(a, "when")
		if scope := field(a, "approver_scope"); scope != "" {
			when += " (by " + scope + ")"
		}
		line(fmt.Sprintf("approvals[%d].when", i), when)
	}
	line("limits.max_tool_calls", field(x, "limits.max_tool_calls"))
	line("limits.max_llm_tokens", field(x, "limits.max_llm_tokens"))
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
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
name, optional version and description, and either the definition or, for
an agent reached over HTTP, the external block (url, tools, models, …)
(docs/agents.md). The file may also be a bare definition (tools, steps,
outcome, …) or a bare external block (url, tools, …) with --name, or what
agents get -o yaml printed, edited: its read-only fields are left
out, with a note. --name and --version set or override the name and the
version (without one, the server numbers the version). - reads standard input.`,
		Example: `  agentplane agents deploy fraud-triage.yaml
  agentplane agents deploy definition.yaml --name fraud-triage
  agentplane agents deploy triage-external.yaml
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
					externalTable(w, d)
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
	cmd.AddCommand(deploy, listCmd, getCmd, versions, promoteCmd, archiveCmd, cardCmd, c.rolloutCommand())
	return cmd
}

// readOnlyFields are the members agents get shows that a deployment does
// not take; any other member is sent on, so the server refuses a typo.
var readOnlyFields = map[string]bool{"id": true, "ref": true, "default": true, "tools": true, "deployed_at": true,
	"default_version": true, "latest_version": true, "versions": true, "created_at": true, "updated_at": true}

// deployment turns what an agents deploy file holds into the body of POST
// /v1/agents: a deployment as it is; a bare definition (it has steps) or a
// bare external block (it has a url) with --name; an agent version or an
// agent as agents get printed it, less its read-only fields, which notes
// name. name and version, when set, win.
func deployment(doc map[string]any, name, version string) (map[string]any, []string, error) {
	var notes []string
	if def, ok := doc["default"].(map[string]any); ok {
		// An agent with its default version (agents get NAME): deploy
		// that version, edited or not.
		what := "definition"
		if def["external"] != nil {
			what = "external block"
		}
		notes = append(notes, fmt.Sprintf("deploying the %s of %s's default version %v", what, field(doc, "name"), def["version"]))
		doc = def
	}
	if doc["definition"] == nil && doc["external"] == nil {
		for _, bare := range []struct{ member, block, called, example string }{
			{"steps", "definition", "definition", "{tools: …, steps: …}"},
			{"url", "external", "external block", "{url: …, tools: …, models: …}"},
		} {
			if _, ok := doc[bare.member]; !ok {
				continue
			}
			if name == "" {
				return nil, nil, fmt.Errorf("this is a bare %s: name its agent with --name, or wrap it as {name: …, %s: %s}",
					bare.called, bare.block, bare.example)
			}
			doc = map[string]any{bare.block: doc}
			break
		}
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
	if body["definition"] == nil && body["external"] == nil {
		return nil, nil, fmt.Errorf("no definition nor external block: the file needs {name: …, definition: {tools: …, steps: …}} or {name: …, external: {url: …, tools: …}} (docs/agents.md), or a bare one with --name")
	}
	return body, notes, nil
}
