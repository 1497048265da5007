package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

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
the command exits 5, so a CI job fails on an API's breaking new version:

  agentplane tools refresh payments || echo "payments changed in a breaking way"

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
				return exitError{code: exitChanged, msg: fmt.Sprintf("tool %s: revision %d breaks callers and is pending (apply it with agentplane tools refresh %s --apply)", a[0], got.Revision, a[0])}
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
