package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// refreshAnswer is what the CLI reads of POST /v1/tools/{id}/refresh.
type refreshAnswer struct {
	Revision     int    `json:"revision"`
	ToolRevision int    `json:"tool_revision"`
	Status       string `json:"status"`
	Breaking     bool   `json:"breaking"`
}

// diffTable prints a refresh's status and diff: one line per operation
// added (+) or removed (-), and per change (~), breaking ones marked.
func diffTable(w io.Writer, doc map[string]any) error {
	vertical(w, doc, "status", "revision", "tool_revision", "breaking")
	diff, _ := doc["diff"].(map[string]any)
	removed, _ := diff["removed"].([]any)
	added, _ := diff["added"].([]any)
	for _, op := range removed {
		fmt.Fprintf(w, "- %v\toperation removed\tbreaking\n", op)
	}
	for _, op := range added {
		fmt.Fprintf(w, "+ %v\toperation added\t\n", op)
	}
	for _, cm := range list(diff, "changed") {
		for _, chm := range list(cm, "changes") {
			mark := ""
			if field(chm, "breaking") == "true" {
				mark = "breaking"
			}
			fmt.Fprintf(w, "~ %s\t%s %s\t%s\t%s\n", field(cm, "operation"), field(chm, "kind"), field(chm, "path"), mark, field(chm, "detail"))
		}
	}
	return nil
}

func (c *cli) toolsRefreshCommand(completeTool func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)) *cobra.Command {
	var apply bool
	cmd := &cobra.Command{
		Use:   "refresh TOOL",
		Short: "Fetch a tool's description again and show what changed",
		Long: `Sends POST /v1/tools/{id}/refresh: the server fetches the tool's spec_url again
and compares its operations with the tool's (docs/change-safety.md). A change
that breaks no caller is applied at once; a breaking one is kept pending, and
the command prints its impact (GET /v1/tools/{id}/revisions/{n}/impact: the
deployed agent versions it breaks and the calls of the last 7 days that no
longer fit) and exits 5 when something is affected, so a CI job fails on an
API's new version that breaks its agents:

  agentplane tools refresh payments || echo "payments changed in a way that breaks its agents"

A breaking revision that affects nothing stays pending and the command exits 0.

--apply applies a pending breaking revision at once (POST
/v1/tools/{id}/revisions/{n}/apply) and exits 0.`,
		Args: args(1, "a tool name or id"), ValidArgsFunction: completeTool,
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := c.toolID(cmd, a[0])
			if err != nil {
				return err
			}
			resp, err := c.send(cmd, http.MethodPost, "/v1/tools/"+url.PathEscape(id)+"/refresh", map[string]any{}, nil, diffTable)
			if err != nil {
				return err
			}
			var got refreshAnswer
			if err := json.Unmarshal(resp.Body, &got); err != nil {
				return fmt.Errorf("the server's answer is not a refresh: %w", err)
			}
			if got.Status != "pending" {
				return nil
			}
			if !apply {
				return c.refreshGate(cmd, id, a[0], got.Revision)
			}
			_, err = c.send(cmd, http.MethodPost, "/v1/tools/"+url.PathEscape(id)+"/revisions/"+strconv.Itoa(got.Revision)+"/apply", map[string]any{}, nil,
				func(w io.Writer, doc map[string]any) error {
					fmt.Fprintf(w, "applied revision %s: the tool is at revision %s\n", field(doc, "revision"), field(doc, "tool_revision"))
					return nil
				})
			return err
		},
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "apply a pending breaking revision at once")
	return cmd
}

// impactAnswer is what the CLI reads of GET …/revisions/{n}/impact.
type impactAnswer struct {
	Impacted bool `json:"impacted"`
	Versions []struct {
		Agent, Version string
		Problems       []struct{ Kind, Step, Operation, Path, Detail string }
	} `json:"versions"`
	Calls struct {
		Checked, Total int
		Items          []struct {
			WorkflowID string   `json:"workflow_id"`
			Step       int      `json:"step"`
			Operation  string   `json:"operation"`
			Part       string   `json:"part"`
			Errors     []string `json:"errors"`
		}
	} `json:"calls"`
}

// impactTable prints a revision's impact: one line per problem of a
// version (!), then per recorded call that no longer fits (x).
func impactTable(w io.Writer, doc map[string]any) error {
	var im impactAnswer
	b, _ := json.Marshal(doc)
	if err := json.Unmarshal(b, &im); err != nil {
		return err
	}
	fmt.Fprintf(w, "impact:\t%d versions, %d of %d recorded calls\n", len(im.Versions), im.Calls.Total, im.Calls.Checked)
	for _, v := range im.Versions {
		for _, p := range v.Problems {
			fmt.Fprintf(w, "! %s@%s\t%s\t%s %s\t%s\n", v.Agent, v.Version, p.Step, p.Kind, p.Path, p.Detail)
		}
	}
	for _, c := range im.Calls.Items {
		fmt.Fprintf(w, "x %s step %d\t%s\t%s\t%s\n", c.WorkflowID, c.Step, c.Operation, c.Part, strings.Join(c.Errors, "; "))
	}
	return nil
}

// refreshGate shows the impact of pending revision n and fails with exit
// 5 when it affects a deployed version or a recorded call.
func (c *cli) refreshGate(cmd *cobra.Command, id, name string, n int) error {
	resp, err := c.send(cmd, http.MethodGet, "/v1/tools/"+url.PathEscape(id)+"/revisions/"+strconv.Itoa(n)+"/impact", nil, nil, impactTable)
	if err != nil {
		return err
	}
	var im impactAnswer
	if err := json.Unmarshal(resp.Body, &im); err != nil {
		return fmt.Errorf("the server's answer is not an impact: %w", err)
	}
	if !im.Impacted {
		fmt.Fprintf(cmd.ErrOrStderr(), "tool %s: revision %d breaks callers but affects no deployed version and no recorded call; it stays pending (apply it with agentplane tools refresh %s --apply)\n", name, n, name)
		return nil
	}
	return exitError{code: exitChanged, msg: fmt.Sprintf("tool %s: revision %d breaks %d deployed versions and %d recorded calls and is pending (apply it with agentplane tools refresh %s --apply)", name, n, len(im.Versions), im.Calls.Total, name)}
}
