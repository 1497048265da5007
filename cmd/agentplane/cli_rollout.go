package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

// rolloutCommand is agents rollout: start, show or end an agent's rollout
// (docs/change-safety.md).
func (c *cli) rolloutCommand() *cobra.Command {
	completeAgent := c.complete("/v1/agents?limit=200", "agents", "name")
	var (
		target, mode, sticky string
		percent              float64
		minRuns              int
		autoPromote, end     bool
		checks, gates        []string
	)
	cmd := &cobra.Command{
		Use:   "rollout AGENT",
		Short: "Start, show or end a canary or shadow rollout of a version",
		Long: `With --target, starts a rollout of that version beside the agent's default:
canary (a sticky --percent of the invocations of the default run the target)
or shadow (that share of the default's finished workflows is replayed against
the target as a dry run: live model, recorded tools). Checks are CEL, over run
for a canary (run.outcome != 'failed') and over original and replay for a
shadow; once the target has --min-runs runs, a check under its --gate (every
check must pass every run without a gate) rolls the rollout back at once.
With --auto-promote, a rollout whose every gate holds then promotes the target.
Without --target, shows the agent's rollout, its arms side by side; with
--end, ends it.`,
		Example: `  agentplane agents rollout triage --target 4 --percent 10 --sticky context.customer_id \
    --check "ok=run.outcome != 'failed'" --gate ok=0.95 --min-runs 50
  agentplane agents rollout triage
  agentplane agents rollout triage --end`,
		Args: args(1, "an agent name"), ValidArgsFunction: completeAgent,
		RunE: func(cmd *cobra.Command, a []string) error {
			path := "/v1/agents/" + url.PathEscape(a[0]) + "/rollout"
			starting := target != ""
			for _, f := range []string{"percent", "mode", "sticky", "check", "gate", "min-runs", "auto-promote"} {
				if cmd.Flags().Changed(f) && !starting {
					return usagef("--%s starts a rollout: give --target too", f)
				}
			}
			switch {
			case end && starting:
				return usagef("--end and --target: end the rollout, or start one")
			case end:
				_, err := c.send(cmd, http.MethodDelete, path, nil, nil, rolloutTable)
				return err
			case !starting:
				return c.get(cmd, path, rolloutTable)
			}
			if !cmd.Flags().Changed("percent") {
				return usagef("--target needs --percent: the share from 0 to 100")
			}
			body := map[string]any{"target": target, "percent": percent}
			if mode != "" {
				body["mode"] = mode
			}
			if sticky != "" {
				body["sticky"] = sticky
			}
			if cmd.Flags().Changed("min-runs") {
				body["min_runs"] = minRuns
			}
			if autoPromote {
				body["auto_promote"] = true
			}
			if err := addChecks(body, checks, gates); err != nil {
				return err
			}
			_, err := c.send(cmd, http.MethodPut, path, body, nil, rolloutTable)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&target, "target", "", "the version to roll out (starts a rollout)")
	fs.Float64Var(&percent, "percent", 0, "the share, from 0 to 100, of invocations (canary) or finished workflows (shadow)")
	fs.StringVar(&mode, "mode", "", "canary (default) or shadow")
	fs.StringVar(&sticky, "sticky", "", "CEL over goal, context and caller whose value keeps an invocation on one arm, e.g. context.customer_id")
	fs.StringArrayVar(&checks, "check", nil, "a check, NAME=EXPR (repeatable)")
	fs.StringArrayVar(&gates, "gate", nil, "NAME=RATE, the minimum pass rate (0..1) of a check on the target (repeatable)")
	fs.IntVar(&minRuns, "min-runs", 20, "the target's runs before a gate decides")
	fs.BoolVar(&autoPromote, "auto-promote", false, "promote the target when every gate holds after --min-runs")
	fs.BoolVar(&end, "end", false, "end the agent's active rollout")
	return cmd
}

// rolloutTable shows a rollout and its arms side by side.
func rolloutTable(w io.Writer, doc map[string]any) error {
	vertical(w, doc, "id", "agent", "state", "failed_check", "mode", "target", "percent", "sticky", "min_runs", "auto_promote", "created_at", "ended_at")
	fmt.Fprintln(w)
	rows(w, list(doc, "arms"), "ARM\tVERSION\tRUNS\tINPUT TOKENS\tOUTPUT TOKENS\tCOST\tCURRENCY",
		"arm", "version", "runs", "input_tokens", "output_tokens", "cost.amount", "cost.currency")
	var checks []map[string]any
	for _, arm := range list(doc, "arms") {
		for _, c := range list(arm, "checks") {
			c["arm"] = arm["arm"]
			checks = append(checks, c)
		}
	}
	if len(checks) > 0 {
		fmt.Fprintln(w)
		rows(w, checks, "ARM\tCHECK\tPASSED\tFAILED\tERRORED\tPASS RATE\tGATE", "arm", "name", "passed", "failed", "errored", "pass_rate", "gate")
	}
	return nil
}
