package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentplane/agentplane/internal/client"
	"github.com/spf13/cobra"
)

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
		name, typ, specURL, specFile, endpoint, policy, key, refresh string
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
				"endpoint_url": reg.endpoint, "policy_class": reg.policy, "refresh": reg.refresh} {
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
	register.Flags().StringVar(&reg.refresh, "refresh", "", "refresh the description from --spec-url this often (a Go duration, at least 1h, e.g. 24h)")
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

	cmd.AddCommand(register, listCmd, getCmd, update, del, ops, c.toolsRefreshCommand(completeTool))
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
		"limits", "operation_limits", "refresh"} {
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
