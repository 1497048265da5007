package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/client"
)

// exitDetached is the exit code of a stream left with Ctrl-C (128+SIGINT).
const exitDetached = 130

func readFile(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{err}
	}
	return raw, nil
}

// parseContext builds an invocation's context from --context-file and
// --context k=v pairs; a value that is JSON (a number, true, an object…)
// is taken as such, anything else as a string.
func parseContext(pairs []string, file string, stdin io.Reader) (map[string]any, error) {
	ctx := map[string]any{}
	if file != "" {
		raw, err := readDocument(file, stdin)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &ctx); err != nil || ctx == nil {
			return nil, usagef("--context-file %s must hold an object", file)
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usagef("--context %q is not key=value", p)
		}
		var val any
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&val); err != nil || dec.More() {
			val = v
		}
		ctx[k] = val
	}
	return ctx, nil
}

// stepLine is one step of a workflow on one line; a completion's is
// completionLine.
func stepLine(ev map[string]any) string {
	if field(ev, "model") != "" {
		return completionLine(ev)
	}
	var what []string
	if t := field(ev, "tool"); t != "" {
		what = append(what, t+"."+field(ev, "operation"))
	}
	for _, k := range []string{"score", "queue", "outcome"} {
		if v := field(ev, k); v != "" {
			what = append(what, k+"="+v)
		}
	}
	if r := field(ev, "reason"); r != "" {
		what = append(what, "reason: "+r)
	}
	// A decision is the stream's approval, or a stored approve step's result.
	dec := "approval."
	if field(ev, "kind") == "approve" {
		dec = "result."
	}
	if by := field(ev, dec+"decided_by"); by != "" {
		what = append(what, "by "+by+" at "+field(ev, dec+"decided_at"))
		if cm := field(ev, dec+"comment"); cm != "" {
			what = append(what, "comment: "+cm)
		}
	}
	if e := field(ev, "error"); e != "" {
		if c := field(ev, "error_code"); c != "" {
			e += " (" + c + ")"
		}
		what = append(what, "error: "+e)
	}
	if n := field(ev, "attempts"); n != "" && n != "1" && n != "0" {
		what = append(what, "attempts="+n)
	}
	return fmt.Sprintf("%4s  %-24s %-16s %s", field(ev, "step"), field(ev, "action"), field(ev, "status"), strings.Join(what, "  "))
}

// summaryLine is a finished (or running) workflow on one line.
func summaryLine(doc map[string]any) string {
	s := fmt.Sprintf("workflow %s %s", field(doc, "workflow_id"), field(doc, "status"))
	if o := field(doc, "outcome"); o != "" {
		s += ", outcome " + o
	}
	if d := field(doc, "duration_ms"); d != "" {
		s += " in " + d + " ms"
	}
	if e := field(doc, "error.detail"); e != "" {
		s += ": " + e
	}
	return s
}

func workflowTable(w io.Writer, doc map[string]any) error {
	for _, st := range list(doc, "steps") {
		fmt.Fprintln(w, stepLine(st))
	}
	fmt.Fprintln(w, summaryLine(doc))
	if u, ok := doc["usage"].(map[string]any); ok {
		line := fmt.Sprintf("usage: %s completions, in=%s out=%s", field(u, "completions"), field(u, "input_tokens"), field(u, "output_tokens"))
		if c := field(u, "cost.amount"); c != "" {
			line += ", cost " + c + " " + field(u, "cost.currency")
		}
		fmt.Fprintln(w, line)
	}
	return outputLine(w, doc)
}

// outputLine prints the workflow's output, when it has one, as JSON.
func outputLine(w io.Writer, doc map[string]any) error {
	out, ok := doc["output"]
	if !ok || out == nil {
		return nil
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "output: %s", b.String())
	return err
}

// engineFailures are the outcomes of a workflow that did not end as its
// agent decided: invoke exits exitWorkflow on them.
var engineFailures = map[string]bool{"failed": true, "denied": true, "limit_exceeded": true, "timed_out": true, "cancelled": true}

// endedBadly is the error of an invoke whose workflow ended with one of
// the engine's failure outcomes, or nil.
func endedBadly(doc map[string]any) error {
	if o := field(doc, "outcome"); engineFailures[o] {
		return exitError{code: exitWorkflow, msg: fmt.Sprintf("workflow %s ended %s", field(doc, "workflow_id"), o)}
	}
	return nil
}

// stream prints each event of a workflow's stream as it arrives: a step
// line (or the event's JSON/YAML), then the summary, their control
// characters escaped (terminalText). Ctrl-C detaches.
func (c *cli) stream(cmd *cobra.Command, req client.Request) error {
	cl, err := c.client(cmd.Context())
	if err != nil {
		return err
	}
	var wfID string
	var last map[string]any
	err = cl.Stream(cmd.Context(), req, func(h http.Header, ev client.Event) error {
		if wfID == "" {
			wfID = h.Get("Workflow-Id")
		}
		if ev.ID == "" { // a JSON answer: the workflow, already finished
			return c.show(ev.Data, workflowTable)
		}
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(ev.Data))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return fmt.Errorf("event %s is not JSON: %w", ev.ID, err)
		}
		last = doc
		switch c.output {
		case "json":
			_, err := fmt.Fprintf(c.stdout, "%s\n", ev.Data)
			return err
		case "yaml":
			var v any
			_ = json.Unmarshal(ev.Data, &v)
			if _, err := fmt.Fprintln(c.stdout, "---"); err != nil {
				return err
			}
			return writeYAML(c.stdout, v)
		}
		out := terminal(c.stdout)
		if field(doc, "event") == "complete" {
			if _, err := fmt.Fprintln(out, summaryLine(doc)); err != nil {
				return err
			}
			return outputLine(out, doc)
		}
		_, err := fmt.Fprintln(out, stepLine(doc))
		return err
	})
	if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
		if wfID == "" {
			wfID = field(last, "workflow_id")
		}
		fmt.Fprintf(c.stderr, "detached: workflow %s goes on running (it was not cancelled); follow it with: agentplane workflows events %s --follow\n", wfID, wfID)
		return exitError{code: exitDetached, msg: "detached"}
	}
	if err == nil && last != nil && field(last, "event") == "complete" {
		if field(last, "status") == "" && field(last, "error.detail") != "" {
			return fmt.Errorf("the stream failed: %s", field(last, "error.detail"))
		}
		return endedBadly(last)
	}
	return err
}

// preferAsyncHeader adds Prefer: respond-async to h (a copy).
func preferAsyncHeader(h http.Header) http.Header {
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Prefer", "respond-async")
	return h
}

// startedTable shows a workflow started without waiting: its id, and the
// command that follows it to its end.
func startedTable(w io.Writer, doc map[string]any) error {
	id := field(doc, "workflow_id")
	fmt.Fprintf(w, "workflow %s is %s\n", id, field(doc, "status"))
	fmt.Fprintf(w, "follow it with: agentplane workflows events %s --follow\n", id)
	return nil
}

func (c *cli) invokeCommand() *cobra.Command {
	var (
		goal, contextFile, key string
		pairs                  []string
		stream, async          bool
		maxCalls               int
		maxTokens              int64
		onExhausted            string
	)
	cmd := &cobra.Command{
		Use:   "invoke AGENT[@VERSION]",
		Short: "Invoke an agent with a goal, and print its steps",
		Long: `Invokes an agent (its default version, or name@version) and prints one line per
step (a completion's names its model, tokens in and out and finish reason),
a summary and the workflow's output. With --stream each step's line is
printed as the step happens; Ctrl-C then detaches from the stream without
cancelling the workflow (agentplane workflows cancel stops it). With --async
it does not wait: it prints the new workflow's id and the command that
follows it (the server answers 202 to Prefer: respond-async).

Exits 6 when the workflow ends failed, denied, limit_exceeded, timed_out or
cancelled, and 0 when it ends with an outcome of its agent or waits for an
approval.`,
		Example: `  agentplane invoke fraud-triage --goal "triage tx_42" --context transaction_id=tx_42 --stream
  agentplane invoke fraud-triage@2 --goal "triage" --context-file ctx.yaml -o json
  agentplane invoke fraud-triage --goal "triage tx_42" --async`,
		Args:              args(1, "an agent name, or name@version"),
		ValidArgsFunction: c.complete("/v1/agents?limit=200", "agents", "name"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if goal == "" {
				return usagef("--goal is required: what the agent should do")
			}
			if async && stream {
				return usagef("--async and --stream exclude each other: --async returns at once, --stream follows the steps")
			}
			ctxv, err := parseContext(pairs, contextFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			body := map[string]any{"goal": goal, "context": ctxv, "stream": stream}
			if cmd.Flags().Changed("max-tool-calls") {
				body["max_tool_calls"] = maxCalls
			}
			if cmd.Flags().Changed("max-llm-tokens") {
				body["max_llm_tokens"] = maxTokens
			}
			if onExhausted != "" {
				body["on_exhausted"] = onExhausted
			}
			req := client.Request{Method: http.MethodPost, Path: "/v1/agents/" + url.PathEscape(a[0]) + "/invoke", Body: body, Header: idempotencyHeader(key)}
			if stream {
				return c.stream(cmd, req)
			}
			if async {
				req.Header = preferAsyncHeader(req.Header)
				_, err := c.send(cmd, req.Method, req.Path, req.Body, req.Header, startedTable)
				return err
			}
			resp, err := c.send(cmd, req.Method, req.Path, req.Body, req.Header, workflowTable)
			if err != nil {
				return err
			}
			var doc map[string]any
			if json.Unmarshal(resp.Body, &doc) != nil {
				return nil
			}
			c.hintDecision(doc)
			return endedBadly(doc)
		},
	}
	cmd.Flags().StringVar(&goal, "goal", "", "what the agent should do (required)")
	cmd.Flags().StringArrayVar(&pairs, "context", nil, "a context value, key=value (repeatable; JSON values are parsed)")
	cmd.Flags().StringVar(&contextFile, "context-file", "", "the context as a YAML or JSON object (- for standard input)")
	cmd.Flags().BoolVar(&stream, "stream", false, "print each step as it happens")
	cmd.Flags().BoolVar(&async, "async", false, "do not wait: print the workflow's id and how to follow it")
	cmd.Flags().IntVar(&maxCalls, "max-tool-calls", 0, "most tool calls the workflow may make (server default 20)")
	cmd.Flags().Int64Var(&maxTokens, "max-llm-tokens", 0, "most LLM tokens (input + output) the workflow's completions may use (default the agent's limits.max_llm_tokens)")
	cmd.Flags().StringVar(&onExhausted, "on-exhausted", "", "fail or ask: when a budget is spent, end the run limit_exceeded or wait for an approval of more (default the agent's limits.on_exhausted)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key: a retry with the same key gets the same workflow")
	return cmd
}

func (c *cli) workflowsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "workflows", Short: "Read, follow, cancel and delete workflows"}
	completeWF := c.complete("/v1/workflows?limit=50", "workflows", "workflow_id")

	filters := []string{"agent", "status", "outcome"}
	since, until := newTimeFlag(time.Now), newTimeFlag(time.Now)
	listCmd := &cobra.Command{
		Use: "list", Short: "List workflows, newest first", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			kv := []string{"limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor"),
				"since", since.RFC3339(), "until", until.RFC3339(), "q", flagString(cmd, "goal")}
			for _, f := range filters {
				kv = append(kv, f, flagString(cmd, f))
			}
			ctxPairs, _ := cmd.Flags().GetStringArray("context")
			for _, p := range ctxPairs {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return usagef("--context %q is not key=value", p)
				}
				kv = append(kv, "context."+k, v)
			}
			return c.get(cmd, "/v1/workflows"+query(kv...), func(w io.Writer, doc map[string]any) error {
				wfs := list(doc, "workflows")
				for _, wf := range wfs {
					if g := field(wf, "goal"); len([]rune(g)) > 40 {
						wf["goal"] = string([]rune(g)[:39]) + "…"
					}
				}
				rows(w, wfs, "WORKFLOW\tAGENT\tVERSION\tSTATUS\tOUTCOME\tSTARTED\tMS\tGOAL",
					"workflow_id", "agent", "agent_version", "status", "outcome", "started_at", "duration_ms", "goal")
				return nil
			})
		},
	}
	pageFlags(listCmd)
	for _, f := range filters {
		listCmd.Flags().String(f, "", "only workflows with this "+f)
	}
	listCmd.Flags().String("goal", "", "only workflows whose goal holds each of these words, in any case")
	listCmd.Flags().StringArray("context", nil, "only workflows whose context has this key=value (repeatable)")
	listCmd.Flags().Var(since, "since", "only workflows started from this time on: RFC 3339, or a duration before now (24h, 7d)")
	listCmd.Flags().Var(until, "until", "only workflows started before this time: RFC 3339, or a duration before now")

	var convo bool
	getCmd := &cobra.Command{
		Use: "get WORKFLOW", Short: "Show a workflow and its steps; --conversation, its completions' messages",
		Args: args(1, "a workflow id"), ValidArgsFunction: completeWF,
		RunE: func(cmd *cobra.Command, a []string) error {
			path := "/v1/workflows/" + url.PathEscape(a[0])
			if convo {
				return c.get(cmd, path, conversation)
			}
			if c.output == "table" {
				// The table shows no conversation: a long run's
				// completions are not fetched.
				path += "?completions=false"
			}
			return c.get(cmd, path, func(w io.Writer, doc map[string]any) error {
				vertical(w, doc, "workflow_id", "agent", "agent_version", "goal", "context", "caller.sub", "replay_of", "started_at", "finished_at")
				fmt.Fprintln(w)
				c.hintDecision(doc)
				return workflowTable(w, doc)
			})
		},
	}
	getCmd.Flags().BoolVar(&convo, "conversation", false, "print the messages of each completion (role, content, tool calls, tool results)")

	var follow bool
	events := &cobra.Command{
		Use:   "events WORKFLOW",
		Short: "Print a workflow's steps; with --follow, stream them until it ends",
		Long: `Prints the steps recorded so far. With --follow it streams the workflow's events
instead, the recorded ones then each new step as it happens, until the workflow
ends; Ctrl-C detaches without cancelling it.`,
		Args: args(1, "a workflow id"), ValidArgsFunction: completeWF,
		RunE: func(cmd *cobra.Command, a []string) error {
			if follow {
				return c.stream(cmd, client.Request{Method: http.MethodGet, Path: "/v1/workflows/" + url.PathEscape(a[0]) + "/events"})
			}
			return c.get(cmd, "/v1/workflows/"+url.PathEscape(a[0]), workflowTable)
		},
	}
	events.Flags().BoolVarP(&follow, "follow", "f", false, "stream new steps until the workflow ends")

	cancel := &cobra.Command{
		Use: "cancel WORKFLOW", Short: "Ask a running workflow to stop at its next step", Args: args(1, "a workflow id"),
		ValidArgsFunction: completeWF,
		RunE: func(cmd *cobra.Command, a []string) error {
			_, err := c.send(cmd, http.MethodPost, "/v1/workflows/"+url.PathEscape(a[0])+"/cancel", nil, nil, func(w io.Writer, doc map[string]any) error {
				fmt.Fprintln(w, summaryLine(doc))
				return nil
			})
			return err
		},
	}
	del := &cobra.Command{
		Use:   "delete WORKFLOW",
		Short: "Delete a finished workflow now, with its steps, completions, replays and keys",
		Long: `Deletes a finished workflow with everything recorded of it, and prints what was
removed. A running or waiting workflow is refused (cancel it first). Needs the
workflows:delete scope. Finished workflows also go by themselves after the
server's --retention.`,
		Args: args(1, "a workflow id"), ValidArgsFunction: completeWF,
		RunE: func(cmd *cobra.Command, a []string) error {
			_, err := c.send(cmd, http.MethodDelete, "/v1/workflows/"+url.PathEscape(a[0]), nil, nil, func(w io.Writer, doc map[string]any) error {
				fmt.Fprintf(w, "deleted %s: %s workflows, %s steps, %s completions, %s replays, %s idempotency records\n",
					field(doc, "id"), field(doc, "workflows"), field(doc, "steps"), field(doc, "completions"),
					field(doc, "replays"), field(doc, "idempotency_records"))
				return nil
			})
			return err
		},
	}
	cmd.AddCommand(listCmd, getCmd, events, cancel, del)
	return cmd
}
