package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/client"
)

// operationsCommand searches the operations of every tool of the tenant.
func (c *cli) operationsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "operations", Short: "Search the operations of all the tenant's tools"}
	search := &cobra.Command{
		Use:   "search WORDS…",
		Short: "Find operations across every tool, best first",
		Long: `Searches the operations of every tool of the tenant (GET /v1/operations), best
match first: words of what you want to do ("create an issue", "list pods").
--tool keeps to one tool (as agentplane tools ops --search does).`,
		Example: `  agentplane operations search create a pull request
  agentplane operations search "refund a payment" --kind write`,
		Args: func(cmd *cobra.Command, a []string) error {
			if len(a) == 0 {
				return usagef("operations search takes the words to look for (see %s --help)", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			words := strings.Join(a, " ")
			return c.get(cmd, "/v1/operations"+query("q", words, "tool", flagString(cmd, "tool"), "kind", flagString(cmd, "kind"),
				"limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")), func(w io.Writer, doc map[string]any) error {
				ops := list(doc, "operations")
				if len(ops) == 0 {
					fmt.Fprintf(w, "no operations match %q\n", words)
					return nil
				}
				rows(w, ops, "TOOL\tOPERATION\tKIND\tMETHOD\tPATH\tSUMMARY\tSCORE", "tool", "id", "kind", "method", "path", "summary", "score")
				return nil
			})
		},
	}
	search.Flags().String("tool", "", "only this tool's operations")
	search.Flags().String("kind", "", "only read or write operations")
	search.Flags().String("limit", "", "page size (1–100, default 20)")
	search.Flags().String("cursor", "", "next_cursor of the previous page")
	cmd.AddCommand(search)
	return cmd
}

// replaysCommand lists replays and shows one with a fresh viewer link.
func (c *cli) replaysCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "replays", Short: "List past replays and show one"}
	listCmd := &cobra.Command{
		Use: "list", Short: "List replays, newest first", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.get(cmd, "/v1/replays"+query("workflow_id", flagString(cmd, "workflow"), "target", flagString(cmd, "target"),
				"limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")), func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "replays"), "REPLAY\tWORKFLOW\tFROM\tTO\tOUTCOME\tREPLAYED\tCREATED",
					"replay_id", "workflow_id", "original_agent_version", "target_agent_version", "original_outcome", "replay_outcome", "created_at")
				return nil
			})
		},
	}
	listCmd.Flags().String("workflow", "", "only replays of this workflow")
	listCmd.Flags().String("target", "", "only replays against this version (name@version)")
	pageFlags(listCmd)
	getCmd := &cobra.Command{
		Use: "get REPLAY", Short: "Show a replay's steps and a fresh viewer link", Args: args(1, "a replay id (rpl_…)"),
		ValidArgsFunction: c.complete("/v1/replays?limit=50", "replays", "replay_id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.get(cmd, "/v1/replays/"+url.PathEscape(a[0]), replayTable)
		},
	}
	cmd.AddCommand(listCmd, getCmd)
	return cmd
}

// batchesCommand lists replay batches, shows one and waits for one.
func (c *cli) batchesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "batches", Short: "List replay batches, show one, wait for one to end"}
	completeBatch := c.complete("/v1/replay-batches?limit=50", "batches", "id")
	listCmd := &cobra.Command{
		Use: "list", Short: "List replay batches, newest first", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.get(cmd, "/v1/replay-batches"+query("target", flagString(cmd, "target"),
				"limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")), func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "batches"), "BATCH\tTARGET\tSTATUS\tDONE\tTOTAL\tCHANGED\tCREATED",
					"id", "target_agent_version", "status", "done", "total", "changed", "created_at")
				return nil
			})
		},
	}
	listCmd.Flags().String("target", "", "only batches against this version (name@version)")
	pageFlags(listCmd)

	var changed, failed bool
	getCmd := &cobra.Command{
		Use: "get BATCH", Short: "Show a batch's counts, outcome matrix and checks; --changed or --failed lists replays",
		Args: args(1, "a batch id (rpb_…)"), ValidArgsFunction: completeBatch,
		RunE: func(cmd *cobra.Command, a []string) error {
			if !changed && !failed {
				return c.get(cmd, "/v1/replay-batches/"+url.PathEscape(a[0]), batchTable)
			}
			if changed && failed {
				return usagef("give --changed or --failed, not both")
			}
			which := "changed"
			if failed {
				which = "failed"
			}
			return c.get(cmd, "/v1/replay-batches/"+url.PathEscape(a[0])+"/replays"+query(which, "true",
				"limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")), func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "replays"), "REPLAY\tWORKFLOW\tOUTCOME\tREPLAYED",
					"replay_id", "workflow_id", "original_outcome", "replay_outcome")
				return nil
			})
		},
	}
	getCmd.Flags().BoolVar(&changed, "changed", false, "list the batch's replays whose outcome changed, with their ids (agentplane replays get ID)")
	getCmd.Flags().BoolVar(&failed, "failed", false, "list the batch's replays that failed a check, with their ids")
	pageFlags(getCmd)

	var failOnChange bool
	wait := &cobra.Command{
		Use:   "wait BATCH",
		Short: "Follow a batch's progress until it ends, then show its outcome matrix",
		Long: `Follows a running batch (one left with Ctrl-C, or started elsewhere) until it
ends, then prints it as agentplane replay --batch does. Exits 1 when the batch
did not complete and, with --fail-on-change, 5 when any outcome changed.`,
		Args: args(1, "a batch id (rpb_…)"), ValidArgsFunction: completeBatch,
		RunE: func(cmd *cobra.Command, a []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			resp, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodGet, Path: "/v1/replay-batches/" + url.PathEscape(a[0])})
			if err != nil {
				return err
			}
			return c.waitBatch(cmd, cl, resp.Body, failOnChange)
		},
	}
	wait.Flags().BoolVar(&failOnChange, "fail-on-change", false, "exit 5 when any outcome changed")
	cmd.AddCommand(listCmd, getCmd, wait)
	return cmd
}
