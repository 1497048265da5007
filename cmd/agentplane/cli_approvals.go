package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/client"
)

func (c *cli) approvalsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "approvals", Short: "List approvals and decide them"}
	completeWF := c.complete("/v1/approvals?status=pending&limit=50", "approvals", "workflow_id")

	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List approvals, newest workflow first",
		Long: `Lists the tenant's approvals: pending ones with the reason, the invoker and the
deadline at which the step's on_timeout applies; decided ones with who decided.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := query("status", flagString(cmd, "status"), "agent", flagString(cmd, "agent"),
				"limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor"))
			return c.get(cmd, "/v1/approvals"+q, func(w io.Writer, doc map[string]any) error {
				as := list(doc, "approvals")
				rows(w, as, "WORKFLOW\tSTEP\tACTION\tSTATUS\tINVOKER\tDEADLINE\tDECIDED_BY\tREASON",
					"workflow_id", "step", "action", "status", "invoker", "deadline", "decided_by", "reason")
				for _, a := range as {
					if field(a, "status") == "pending" {
						fmt.Fprintln(c.stderr, "decide with: agentplane approvals approve|deny WORKFLOW [STEP] [--comment TEXT]")
						break
					}
				}
				return nil
			})
		},
	}
	listCmd.Flags().String("status", "", "pending or decided (default both)")
	listCmd.Flags().String("agent", "", "only approvals of this agent")
	pageFlags(listCmd)

	decide := func(verb, decision, short string) *cobra.Command {
		var (
			comment string
			budget  int64
		)
		d := &cobra.Command{
			Use:   verb + " WORKFLOW [STEP]",
			Short: short,
			Long: `Decides the approval a workflow waits at and resumes it. STEP is the number of
the step waiting for a decision, or its action; without it, the step the
workflow waits at. You need workflows:approve and the step's approver_scope,
and may not decide a workflow you invoked unless the step sets allow_self.`,
			Args: func(cmd *cobra.Command, a []string) error {
				if len(a) < 1 || len(a) > 2 {
					return usagef("%s takes a workflow id and, optionally, a step (see %s --help)", strings.TrimPrefix(cmd.CommandPath(), "agentplane "), cmd.CommandPath())
				}
				return nil
			},
			ValidArgsFunction: completeWF,
			RunE: func(cmd *cobra.Command, a []string) error {
				var step string
				if len(a) == 2 {
					step = a[1]
				} else {
					var err error
					if step, err = c.waitingStep(cmd, a[0]); err != nil {
						return err
					}
				}
				body := map[string]any{"decision": decision}
				if comment != "" {
					body["comment"] = comment
				}
				if cmd.Flags().Changed("budget") {
					body["budget"] = budget
				}
				path := "/v1/workflows/" + url.PathEscape(a[0]) + "/approvals/" + url.PathEscape(step)
				_, err := c.send(cmd, http.MethodPost, path, body, nil, func(w io.Writer, doc map[string]any) error {
					fmt.Fprintf(w, "%s step %s (%s) of workflow %s as %s\n", field(doc, "status"), field(doc, "step"),
						field(doc, "action"), field(doc, "workflow_id"), field(doc, "decided_by"))
					return nil
				})
				return err
			},
		}
		d.Flags().StringVar(&comment, "comment", "", "a comment kept with the decision")
		if decision == "approve" {
			d.Flags().Int64Var(&budget, "budget", 0, "on a budget_exhausted approval, grant this many more tokens or tool calls (default the same budget again)")
		}
		return d
	}
	cmd.AddCommand(listCmd,
		decide("approve", "approve", "Approve the step a workflow waits at"),
		decide("deny", "deny", "Deny the step a workflow waits at"))
	return cmd
}

// waitingStep is the number of the step the workflow waits at.
func (c *cli) waitingStep(cmd *cobra.Command, id string) (string, error) {
	cl, err := c.client(cmd.Context())
	if err != nil {
		return "", err
	}
	resp, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodGet, Path: "/v1/workflows/" + url.PathEscape(id)})
	if err != nil {
		return "", err
	}
	var doc map[string]any
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return "", fmt.Errorf("read workflow %s: %w", id, err)
	}
	// The newest step that asked for a decision, decided or not: for one
	// decided already the server says by whom and when.
	step := ""
	steps := list(doc, "steps")
	for i := len(steps) - 1; i >= 0 && step == ""; i-- {
		if field(steps[i], "status") == "waiting_approval" {
			step = field(steps[i], "step")
		}
	}
	if step == "" {
		return "", fmt.Errorf("workflow %s has no approval step to decide: agentplane approvals list --status pending shows what waits for a decision", id)
	}
	return step, nil
}

// hintDecision says on stderr how to decide a workflow that waits for an
// approval, given the workflow as the API shows it.
func (c *cli) hintDecision(doc map[string]any) {
	if field(doc, "status") != "waiting" {
		return
	}
	id := field(doc, "workflow_id")
	fmt.Fprintf(c.stderr, "waiting for a decision: agentplane approvals approve %s (or deny %s), by someone holding workflows:approve other than the invoker\n", id, id)
}
