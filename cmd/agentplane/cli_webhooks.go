package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// webhookTable shows one webhook, and its secret once when the answer has it.
func (c *cli) webhookTable(w io.Writer, doc map[string]any) error {
	vertical(w, doc, "id", "url", "events", "agent", "description", "created_at")
	if s := field(doc, "secret"); s != "" {
		fmt.Fprintf(w, "secret:\t%s\n", s)
		fmt.Fprintln(c.stderr, "the secret is shown this once: keep it where your receiver can read it (docs/webhooks.md)")
	}
	return nil
}

func (c *cli) webhooksCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "webhooks", Short: "Send the tenant's events to HTTP endpoints, signed"}
	completeWebhook := c.complete("/v1/webhooks", "webhooks", "id")

	var in struct {
		url, agent, description string
		events                  []string
	}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a webhook; its signing secret is shown once",
		Long: `Creates a webhook: each event of the kinds given is POSTed to --url under the
Standard Webhooks specification (webhook-id, webhook-timestamp, webhook-signature
headers), retried for 24 hours. Events: workflow.completed, workflow.failed,
workflow.cancelled, workflow.waiting, approval.decided, replay.completed,
replay_batch.completed, tool.drifted, rollout.started, rollout.rolled_back,
rollout.promoted, rollout.ended.`,
		Example: `  agentplane webhooks create --url https://hooks.example.com/agentplane \
    --event workflow.completed --event workflow.failed --agent triage`,
		Args: args(0, "no arguments: the webhook is given by flags"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := map[string]any{"url": in.url, "events": in.events}
			if in.agent != "" {
				body["agent"] = in.agent
			}
			if in.description != "" {
				body["description"] = in.description
			}
			_, err := c.send(cmd, http.MethodPost, "/v1/webhooks", body, nil, c.webhookTable)
			return err
		},
	}
	create.Flags().StringVar(&in.url, "url", "", "the receiver's https URL (required)")
	create.Flags().StringArrayVar(&in.events, "event", nil, "an event to send (repeatable; required)")
	create.Flags().StringVar(&in.agent, "agent", "", "only this agent's events")
	create.Flags().StringVar(&in.description, "description", "", "a note for people")

	listCmd := &cobra.Command{
		Use: "list", Short: "List the tenant's webhooks", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.get(cmd, "/v1/webhooks", func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "webhooks"), "ID\tURL\tEVENTS\tAGENT", "id", "url", "events", "agent")
				return nil
			})
		},
	}
	var status string
	deliveries := &cobra.Command{
		Use: "deliveries WEBHOOK", Short: "List a webhook's deliveries, newest first", Args: args(1, "a webhook id"),
		ValidArgsFunction: completeWebhook,
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.get(cmd, "/v1/webhooks/"+url.PathEscape(a[0])+"/deliveries"+query("status", status, "limit", flagString(cmd, "limit")),
				func(w io.Writer, doc map[string]any) error {
					rows(w, list(doc, "deliveries"), "ID\tTYPE\tWORKFLOW\tSTATUS\tATTEMPTS\tCODE\tNEXT_ATTEMPT\tERROR",
						"id", "type", "workflow_id", "status", "attempts", "last_status_code", "next_attempt_at", "last_error")
					return nil
				})
		},
	}
	deliveries.Flags().StringVar(&status, "status", "", "pending, delivered or failed (default all)")
	deliveries.Flags().String("limit", "", "how many (1–100, default 20)")
	retry := &cobra.Command{
		Use: "retry WEBHOOK DELIVERY", Short: "Send a delivery again, with the same webhook-id",
		Args: args(2, "a webhook id and a delivery id (msg_…)"), ValidArgsFunction: completeWebhook,
		RunE: func(cmd *cobra.Command, a []string) error {
			_, err := c.send(cmd, http.MethodPost, "/v1/webhooks/"+url.PathEscape(a[0])+"/deliveries/"+url.PathEscape(a[1])+"/retry", nil, nil,
				func(w io.Writer, doc map[string]any) error {
					fmt.Fprintf(w, "%s %s, next attempt %s\n", field(doc, "id"), field(doc, "status"), field(doc, "next_attempt_at"))
					return nil
				})
			return err
		},
	}
	rotate := &cobra.Command{
		Use: "rotate WEBHOOK", Short: "Give a webhook a new secret; the old one signs too for 24 hours",
		Args: args(1, "a webhook id"), ValidArgsFunction: completeWebhook,
		RunE: func(cmd *cobra.Command, a []string) error {
			_, err := c.send(cmd, http.MethodPost, "/v1/webhooks/"+url.PathEscape(a[0])+"/rotate-secret", nil, nil, c.webhookTable)
			return err
		},
	}
	del := &cobra.Command{
		Use: "delete WEBHOOK", Short: "Delete a webhook and its deliveries", Args: args(1, "a webhook id"),
		ValidArgsFunction: completeWebhook,
		RunE: func(cmd *cobra.Command, a []string) error {
			_, err := c.send(cmd, http.MethodDelete, "/v1/webhooks/"+url.PathEscape(a[0]), nil, nil, func(w io.Writer, doc map[string]any) error {
				fmt.Fprintf(w, "deleted %s\n", strings.TrimSpace(field(doc, "id")))
				return nil
			})
			return err
		},
	}
	cmd.AddCommand(create, listCmd, deliveries, retry, rotate, del)
	return cmd
}
