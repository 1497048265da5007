package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/client"
	"github.com/spf13/cobra"
)

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
