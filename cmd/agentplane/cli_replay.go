package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

// side describes one side of an aligned replay step.
func side(st map[string]any) string {
	if st == nil {
		return "-"
	}
	s := field(st, "status")
	switch {
	case field(st, "tool") != "":
		s += " " + field(st, "tool") + "." + field(st, "operation")
	case field(st, "score") != "":
		s += " score=" + field(st, "score")
	case field(st, "queue") != "":
		s += " queue=" + field(st, "queue")
	case field(st, "outcome") != "":
		s += " outcome=" + field(st, "outcome")
	}
	if field(st, "injected.fault") != "" {
		s += " [fault " + field(st, "injected.fault") + " injected]"
	}
	return s
}

func replayTable(w io.Writer, doc map[string]any) error {
	mode := "dry run"
	if field(doc, "dry_run") == "false" {
		mode = "live, new workflow " + field(doc, "replay_workflow_id")
	} else if field(doc, "llm") == "live" || field(doc, "unrecorded_calls") == "read" {
		mode += ", llm " + field(doc, "llm") + ", unrecorded calls " + field(doc, "unrecorded_calls")
	}
	fmt.Fprintf(w, "replay %s of %s: %s -> %s (%s)\n", field(doc, "replay_id"), field(doc, "workflow_id"),
		field(doc, "original_agent_version"), field(doc, "target_agent_version"), mode)
	if field(doc, "status") == "running" {
		fmt.Fprintf(w, "status: running (read it again with: agentplane replays get %s)\n", field(doc, "replay_id"))
	}
	fmt.Fprintf(w, "outcome: %s -> %s\n", field(doc, "original_outcome"), field(doc, "replay_outcome"))
	if e := field(doc, "replay_error"); e != "" {
		fmt.Fprintf(w, "replay error: %s\n", e)
	}
	printUsage(w, doc)
	if faults := list(doc, "faults"); len(faults) > 0 {
		fmt.Fprintf(w, "faults: %d given; the steps they answered say [fault N injected]\n", len(faults))
	}
	fmt.Fprintf(w, "delta: %s added, %s changed, %s removed, %s tool calls changed\n\n", field(doc, "delta.steps_added"),
		field(doc, "delta.steps_changed"), field(doc, "delta.steps_removed"), field(doc, "delta.tool_calls_changed"))
	fmt.Fprintln(w, "KIND\tACTION\tORIGINAL\tREPLAY\tCHANGED")
	for _, e := range list(doc, "steps") {
		orig, _ := e["original"].(map[string]any)
		rep, _ := e["replay"].(map[string]any)
		action := field(orig, "action")
		if action == "" {
			action = field(rep, "action")
		}
		changed := field(e, "changed_fields")
		if changed == "" {
			changed = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", field(e, "kind"), action, side(orig), side(rep), changed)
	}
	fmt.Fprintf(w, "\nviewer: %s\n", field(doc, "viewer_url"))
	return nil
}

// printUsage prints the usage of both runs, when either had a completion.
func printUsage(w io.Writer, doc map[string]any) {
	for _, side := range []string{"usage.original", "usage.replay"} {
		if n := field(doc, side+".completions"); n != "" && n != "0" {
			fmt.Fprintf(w, "usage: original %s; replay %s\n", usageText(doc, "usage.original"), usageText(doc, "usage.replay"))
			return
		}
	}
}

// usageText is one side of a usage document: completions, tokens, cost.
func usageText(doc map[string]any, side string) string {
	text := fmt.Sprintf("%s completions, %s in / %s out tokens", field(doc, side+".completions"),
		field(doc, side+".input_tokens"), field(doc, side+".output_tokens"))
	if amount := field(doc, side+".cost.amount"); amount != "" {
		text += ", " + amount + " " + field(doc, side+".cost.currency")
	}
	return text
}

// whatIfFlags are replay's what-if flags, for one workflow and --batch.
type whatIfFlags struct {
	llm, unrecorded string
	concurrency     int
	faults          faultFlags
}

func (f *whatIfFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.llm, "llm", "", "dry runs: recorded (serve completions from the record, the default) or live (ask the target's models now)")
	cmd.Flags().StringVar(&f.unrecorded, "unrecorded-calls", "", "dry runs: skip (calls with no recorded answer are not made, the default) or read (make the reads among them live)")
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 0, "--batch: replays at once, 1 to 64 (default 8 with --llm live)")
	f.faults.register(cmd.Flags())
}

// set adds the flags given to a request body.
func (f *whatIfFlags) set(body map[string]any, stdin io.Reader) error {
	for k, v := range map[string]string{"llm": f.llm, "unrecorded_calls": f.unrecorded} {
		if v != "" {
			body[k] = v
		}
	}
	if f.concurrency != 0 {
		body["concurrency"] = f.concurrency
	}
	return f.faults.apply(body, stdin)
}

func (c *cli) replayCommand() *cobra.Command {
	var target, key string
	var live bool
	var wf whatIfFlags
	bf := batchFlags{since: newTimeFlag(time.Now)}
	cmd := &cobra.Command{
		Use:   "replay [WORKFLOW…] --target AGENT@VERSION [--batch]",
		Short: "Replay past workflows against another agent version and show what changes",
		Long: `Runs a finished workflow again against another agent version and prints both
outcomes, the delta and the aligned steps, and the viewer URL of the side-by-side
page (open it in a browser; no token needed). A dry run (the default) serves
every tool call and LLM answer from the record and touches nothing outside
agentplane; --live runs a real new workflow (needs agents:invoke). A what-if
dry run asks the target's models again (--llm live) and may make the reads
that have no recorded answer (--unrecorded-calls read); it never sends a write.

With --batch, replays many workflows as dry runs on the server: the ones named,
or those the filters select (--agent, --agent-version, --outcome, --since,
--limit). Progress shows while it runs (a bar on a terminal, plain lines
otherwise); then the outcome matrix. With --fail-on-change the command exits 5
when any outcome changed: a regression gate for CI. Ctrl-C detaches; the batch
goes on.

--dataset replays a dataset's workflows instead (agentplane datasets). --check
adds checks of each replay: NAME=EXPR, a CEL expression over original, replay
and expected, or the NAME of a built-in (outcome_unchanged, output_unchanged,
same_tool_calls, expected_outcome); --judge-model and --rubric add an
LLM-as-judge check named judge. --gate NAME=RATE sets a check's minimum pass
rate. The command exits 5 when the batch's verdict is failed: a gated check
under its minimum or, without --gate, any check failed. --junit FILE writes a
JUnit XML report, one test case per workflow and check, for CI.

--fault injects a failure into the calls it matches instead of their answer,
in a dry or a live replay and in every replay of a batch: TOOL[.OPERATION]=
STATUS|timeout|transport[@RATE], or a fault as JSON with when, body and
headers; --faults-file reads a list of them. The call is never sent; which
calls a rate picks depends on the workflow and the step only, so a batch run
again fails the same items (docs/change-safety.md).`,
		Example: `  agentplane replay wf_01JD… --target fraud-triage@2
  agentplane replay --batch --target fraud-triage@2 --agent fraud-triage --since 168h --fail-on-change
  agentplane replay --batch --target fraud-triage@2 --dataset triage-suite --check outcome_unchanged \
    --check 'no_denial=replay.outcome != "denied"' --gate outcome_unchanged=0.95 --junit replay.xml
  agentplane replay --batch --target support@3 --agent support --llm live --unrecorded-calls read --concurrency 16
  agentplane replay --batch --target fraud-triage@2 --agent fraud-triage --fault payments.getTransaction=503@0.5 \
    --check 'no_failure=replay.outcome != "failed"' --gate no_failure=0.95`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.complete("/v1/workflows?limit=50", "workflows", "workflow_id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if target == "" {
				return usagef("--target is required: the agent version to replay against, name@version")
			}
			if bf.batch {
				if live {
					return usagef("--live cannot be used with --batch: batches are dry runs")
				}
				return c.replayBatch(cmd, target, a, bf, wf, key)
			}
			if wf.concurrency != 0 {
				return usagef("--concurrency applies to --batch only")
			}
			if bf.checks.any() || bf.checks.dataset != "" || bf.checks.junit != "" {
				return usagef("--dataset, --check, --judge-model, --rubric, --gate and --junit need --batch")
			}
			if len(a) != 1 {
				return usagef("give one workflow id, or --batch to replay several")
			}
			body := map[string]any{"target_agent_version": target, "dry_run": !live}
			if err := wf.set(body, cmd.InOrStdin()); err != nil {
				return err
			}
			_, err := c.send(cmd, http.MethodPost, "/v1/workflows/"+url.PathEscape(a[0])+"/replay", body, idempotencyHeader(key), replayTable)
			return err
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "the version to replay against, name@version (required)")
	cmd.Flags().BoolVar(&live, "live", false, "run a real new workflow instead of a dry run")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key of the request, to retry it safely")
	cmd.Flags().BoolVar(&bf.batch, "batch", false, "replay many workflows: those named, or those the filters select")
	cmd.Flags().StringVar(&bf.agent, "agent", "", "--batch: workflows of this agent")
	cmd.Flags().StringVar(&bf.version, "agent-version", "", "--batch: workflows that ran this version")
	cmd.Flags().StringVar(&bf.outcome, "outcome", "", "--batch: workflows with this outcome")
	cmd.Flags().Var(bf.since, "since", "--batch: workflows started from this time on: RFC 3339, or a duration before now (168h or 7d: the last week)")
	cmd.Flags().IntVar(&bf.limit, "limit", 0, "--batch: most workflows to replay (server default 1000, at most 10000)")
	cmd.Flags().BoolVar(&bf.failOnChange, "fail-on-change", false, "--batch: exit 5 when any outcome changed")
	bf.checks.register(cmd.Flags())
	wf.add(cmd)
	return cmd
}
