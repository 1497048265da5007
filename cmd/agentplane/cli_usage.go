package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completionLine is a completion's step on one line, aligned with the
// other steps: "   1  solve                    ok               completion
// gpt-4o-mini  in=812 out=40  tool_calls".
func completionLine(ev map[string]any) string {
	s := fmt.Sprintf("%4s  %-24s %-16s completion %s  in=%s out=%s  %s", field(ev, "step"), field(ev, "action"), field(ev, "status"),
		field(ev, "model"), orDash(field(ev, "input_tokens")), orDash(field(ev, "output_tokens")), field(ev, "finish_reason"))
	if e := field(ev, "error"); e != "" {
		s += "  error: " + e
	}
	if c := field(ev, "error_code"); c != "" {
		s += " (" + c + ")"
	}
	return strings.TrimRight(s, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// costs is a usage group's cost, one amount per currency.
func costs(doc map[string]any) string {
	var out []string
	for _, c := range list(doc, "cost") {
		out = append(out, field(c, "amount")+" "+field(c, "currency"))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " + ")
}

// conversation prints the messages of each completion of a workflow: each
// request's messages new since the completion before it, then the answer.
func conversation(w io.Writer, doc map[string]any) error {
	comps := list(doc, "completions")
	if len(comps) == 0 {
		_, err := fmt.Fprintln(w, "the workflow made no completion")
		return err
	}
	seen := 0
	for _, c := range comps {
		fmt.Fprintf(w, "── completion %s (step %s, %s, in=%s out=%s, %s)\n", field(c, "n"), field(c, "step"),
			field(c, "model"), field(c, "usage.input_tokens"), field(c, "usage.output_tokens"), orDash(field(c, "finish_reason")))
		if field(c, "content_hidden") == "true" {
			fmt.Fprintln(w, "   (messages hidden: they hold answers of tools you hold no tool:<name> scope for)")
			continue
		}
		req, _ := c["request"].(map[string]any)
		msgs := list(req, "messages")
		if seen > len(msgs) {
			seen = 0
		}
		for _, m := range msgs[seen:] {
			messageLines(w, m)
		}
		if resp, ok := c["response"].(map[string]any); ok {
			if m, ok := resp["message"].(map[string]any); ok {
				messageLines(w, m)
			}
		}
		seen = len(msgs) + 1 // the answer is the next request's
	}
	return nil
}

// messageLines prints one chat message: its role and content, each tool
// call it asks for, or the call a tool result answers.
func messageLines(w io.Writer, m map[string]any) {
	role := field(m, "role")
	if id := field(m, "tool_call_id"); id != "" {
		role += " (" + id + ")"
	}
	if content := field(m, "content"); content != "" {
		fmt.Fprintf(w, "%-10s %s\n", role+":", content)
	} else if len(list(m, "tool_calls")) == 0 {
		fmt.Fprintf(w, "%-10s\n", role+":")
	}
	for _, tc := range list(m, "tool_calls") {
		fmt.Fprintf(w, "%-10s calls %s(%s) [%s]\n", role+":", field(tc, "name"), field(tc, "arguments"), field(tc, "id"))
	}
}

func (c *cli) usageCommand() *cobra.Command {
	since, until := newTimeFlag(time.Now), newTimeFlag(time.Now)
	var groupBy string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show the tenant's LLM tokens and cost by agent, model or day",
		Long: `Prints the tenant's LLM usage over whole UTC days (since's day to until's,
default the last 30 days): tokens in and out, completions and cost per agent,
model or day, then the total. Needs the usage:read scope.`,
		Example: `  agentplane usage --group-by agent --since 7d
  agentplane usage --group-by day --since 2026-11-01T00:00:00Z -o json`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/v1/usage" + query("since", since.RFC3339(), "until", until.RFC3339(), "group_by", groupBy)
			return c.get(cmd, path, func(w io.Writer, doc map[string]any) error {
				by := field(doc, "group_by")
				fmt.Fprintf(w, "%s to %s\n", field(doc, "since"), field(doc, "until"))
				fmt.Fprintf(w, "%s\tINPUT\tOUTPUT\tCOMPLETIONS\tCOST\n", strings.ToUpper(by))
				for _, g := range list(doc, "groups") {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", field(g, by), field(g, "input_tokens"), field(g, "output_tokens"),
						field(g, "completions"), costs(g))
				}
				total, _ := doc["total"].(map[string]any)
				_, err := fmt.Fprintf(w, "TOTAL\t%s\t%s\t%s\t%s\n", field(total, "input_tokens"), field(total, "output_tokens"),
					field(total, "completions"), costs(total))
				return err
			})
		},
	}
	cmd.Flags().Var(since, "since", "the first day counted: RFC 3339, or a duration before now (24h, 7d)")
	cmd.Flags().Var(until, "until", "the last day counted: RFC 3339, or a duration before now (default today)")
	cmd.Flags().StringVar(&groupBy, "group-by", "model", "agent, model or day")
	return cmd
}
