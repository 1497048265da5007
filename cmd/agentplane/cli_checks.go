package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/internal/client"
)

// checkFlags are replay --batch's flags of datasets, checks, the judge,
// the gate and the JUnit report.
type checkFlags struct {
	dataset           string
	checks, gates     []string
	judgeModel        string
	rubric            string
	passScore         float64
	junit             string
	passScoreExplicit func() bool
}

func (f *checkFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.dataset, "dataset", "", "--batch: replay a dataset's workflows, NAME or NAME@VERSION (instead of ids or filters)")
	fs.StringArrayVar(&f.checks, "check", nil, "--batch: a check, NAME=EXPR (CEL over original, replay, expected) or a built-in NAME: outcome_unchanged, output_unchanged, same_tool_calls, expected_outcome (repeatable)")
	fs.StringVar(&f.judgeModel, "judge-model", "", "--batch: an LLM-as-judge check: the model that scores each replay 0..1 (needs --rubric)")
	fs.StringVar(&f.rubric, "rubric", "", "--batch: what the judge scores a replay against")
	fs.Float64Var(&f.passScore, "judge-pass-score", 0.7, "--batch: the judge's score (0..1) from which a replay passes")
	fs.StringArrayVar(&f.gates, "gate", nil, "--batch: NAME=RATE, the minimum pass rate (0..1) of a check (the judge's is judge); exit 5 under it (repeatable)")
	fs.StringVar(&f.junit, "junit", "", "--batch: write a JUnit XML report to this file once the batch ends: one test case per workflow and check")
	f.passScoreExplicit = func() bool { return fs.Changed("judge-pass-score") }
}

// any reports whether a flag other than --dataset and --junit was given.
func (f *checkFlags) any() bool {
	return len(f.checks) > 0 || len(f.gates) > 0 || f.judgeModel != "" || f.rubric != "" || f.passScoreExplicit()
}

// apply adds the checks, the judge and the gate to a batch request.
func (f *checkFlags) apply(body map[string]any) error {
	if f.dataset != "" {
		body["dataset"] = f.dataset
	}
	if err := addChecks(body, f.checks, nil); err != nil {
		return err
	}
	switch {
	case f.judgeModel != "" && f.rubric == "":
		return usagef("--judge-model needs --rubric: what the judge scores each replay against")
	case f.judgeModel == "" && (f.rubric != "" || f.passScoreExplicit()):
		return usagef("--rubric and --judge-pass-score need --judge-model: the model that judges")
	case f.judgeModel != "":
		if f.passScore < 0 || f.passScore > 1 {
			return usagef("--judge-pass-score %v: give a score from 0 to 1", f.passScore)
		}
		body["judge"] = map[string]any{"model": f.judgeModel, "rubric": f.rubric, "pass_score": f.passScore}
	}
	return addChecks(body, nil, f.gates)
}

// addChecks adds --check NAME=EXPR (or a built-in NAME) and --gate
// NAME=RATE flags to a request body as its checks and gate.
func addChecks(body map[string]any, checkFlags, gateFlags []string) error {
	var checks []map[string]any
	for _, c := range checkFlags {
		name, expr, hasExpr := strings.Cut(c, "=")
		name = strings.TrimSpace(name)
		if name == "" || (hasExpr && strings.TrimSpace(expr) == "") {
			return usagef("--check %q: give NAME=EXPR, or the NAME of a built-in check", c)
		}
		check := map[string]any{"name": name}
		if hasExpr {
			check["expr"] = expr
		}
		checks = append(checks, check)
	}
	if len(checks) > 0 {
		body["checks"] = checks
	}
	if len(gateFlags) > 0 {
		gate := map[string]float64{}
		for _, g := range gateFlags {
			name, rate, ok := strings.Cut(g, "=")
			r, err := strconv.ParseFloat(strings.TrimSpace(rate), 64)
			if !ok || strings.TrimSpace(name) == "" || err != nil || r < 0 || r > 1 {
				return usagef("--gate %q: give NAME=RATE, a check's name and its minimum pass rate from 0 to 1 (for example outcome_unchanged=0.95)", g)
			}
			gate[strings.TrimSpace(name)] = r
		}
		body["gate"] = gate
	}
	return nil
}

// checksTable shows a batch's checks and verdict, when it has checks.
func checksTable(w io.Writer, doc map[string]any) error {
	checks := list(doc, "checks")
	if len(checks) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tPASS RATE\tGATE\tPASSED\tFAILED\tERRORED\t")
	for _, c := range checks {
		// Documents are decoded with json.Number: read the numbers from their text.
		rate, _ := strconv.ParseFloat(field(c, "pass_rate"), 64)
		gate, mark := "-", ""
		if g, err := strconv.ParseFloat(field(c, "gate"), 64); err == nil {
			gate = fmt.Sprintf("%.1f%%", g*100)
			if rate < g {
				mark = "under the gate"
			}
		}
		fmt.Fprintf(tw, "%s\t%.1f%%\t%s\t%s\t%s\t%s\t%s\n", field(c, "name"), rate*100, gate, field(c, "passed"), field(c, "failed"), field(c, "errored"), mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v := field(doc, "verdict"); v != "" {
		fmt.Fprintf(w, "verdict: %s\n", v)
	}
	fmt.Fprintf(w, "replays that failed a check: agentplane batches get %s --failed\n", field(doc, "id"))
	return nil
}

// JUnit XML, as CI systems read it: one suite, a case per workflow and
// check, failures and errors with messages.
type junitSuite struct {
	XMLName    xml.Name        `xml:"testsuite"`
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes the JUnit report of a finished batch to path.
func (c *cli) writeJUnit(cmd *cobra.Command, cl *client.Client, batchID, path string) error {
	resp, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodGet, Path: "/v1/replay-batches/" + url.PathEscape(batchID)})
	if err != nil {
		return err
	}
	var b map[string]any
	if err := json.Unmarshal(resp.Body, &b); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	suite := junitSuite{Name: "agentplane replay " + field(b, "id") + " against " + field(b, "target_agent_version"), Time: "0",
		Properties: []junitProperty{{"batch", field(b, "id")}, {"target_agent_version", field(b, "target_agent_version")},
			{"status", field(b, "status")}, {"verdict", field(b, "verdict")}, {"dataset", field(b, "dataset")}, {"report", field(b, "viewer_url")}}}
	if created, err := time.Parse(time.RFC3339Nano, field(b, "created_at")); err == nil {
		suite.Timestamp = created.UTC().Format("2006-01-02T15:04:05")
		if finished, err := time.Parse(time.RFC3339Nano, field(b, "finished_at")); err == nil {
			suite.Time = strconv.FormatFloat(finished.Sub(created).Seconds(), 'f', 3, 64)
		}
	}
	cursor := ""
	for {
		resp, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodGet,
			Path: "/v1/replay-batches/" + url.PathEscape(batchID) + "/replays" + query("limit", "200", "cursor", cursor)})
		if err != nil {
			return err
		}
		var pg map[string]any
		if err := json.Unmarshal(resp.Body, &pg); err != nil {
			return fmt.Errorf("the server's answer is not JSON: %w", err)
		}
		for _, rp := range list(pg, "replays") {
			suite.add(rp)
		}
		if cursor = field(pg, "next_cursor"); cursor == "" {
			break
		}
	}
	out, err := xml.MarshalIndent(suite, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the JUnit report: %w", err)
	}
	data := append([]byte(xml.Header), append(out, '\n')...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	fmt.Fprintf(c.stderr, "JUnit report: %s (%d test cases, %d failures, %d errors)\n", path, suite.Tests, suite.Failures, suite.Errors)
	return nil
}

// add adds a replay's test cases: one per check, or one on its outcome
// when the batch has no checks.
func (s *junitSuite) add(rp map[string]any) {
	wf, from, to := field(rp, "workflow_id"), field(rp, "original_outcome"), field(rp, "replay_outcome")
	change := "outcome " + from + " → " + to
	checks := list(rp, "checks")
	if len(checks) == 0 {
		checks = []map[string]any{{"name": "outcome_unchanged", "passed": from == to}}
	}
	for _, ch := range checks {
		tc := junitCase{Name: field(ch, "name"), ClassName: wf, Time: "0", SystemOut: "replay: " + field(rp, "viewer_url")}
		passed, _ := ch["passed"].(bool)
		switch {
		case field(ch, "error") != "":
			tc.Error = &junitProblem{Type: "check-error", Message: field(ch, "error"),
				Text: fmt.Sprintf("check %s could not run on workflow %s (%s): %s", tc.Name, wf, change, field(ch, "error"))}
			s.Errors++
		case !passed:
			msg := fmt.Sprintf("workflow %s failed check %s: %s", wf, tc.Name, change)
			if sc := field(ch, "score"); sc != "" {
				msg += "; score " + sc
			}
			if r := field(ch, "reason"); r != "" {
				msg += ": " + r
			}
			text := msg
			if e := field(rp, "replay_error"); e != "" {
				text += "\nreplay error: " + e
			}
			tc.Failure = &junitProblem{Type: "check-failed", Message: msg, Text: text}
			s.Failures++
		}
		s.Cases = append(s.Cases, tc)
		s.Tests++
	}
}

// datasetsCommand creates, lists and shows datasets.
func (c *cli) datasetsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "datasets", Short: "Create, list and show datasets: named, versioned workflow lists for replay batches"}
	completeDataset := c.complete("/v1/datasets?limit=50", "datasets", "name")

	var (
		ids                     []string
		agent, version, outcome string
		expect, description     string
		limit                   int
		next                    bool
		since                   = newTimeFlag(time.Now)
	)
	create := &cobra.Command{
		Use:   "create NAME (--workflow-ids ID,… | --agent AGENT [--since …]) [--expect FILE]",
		Short: "Create a dataset, or with --next its next version",
		Long: `Creates version 1 of a dataset from workflow ids or a filter of finished
workflows (at most 10,000), or with --next the dataset's next immutable version.
--expect reads a JSON file of expectations by workflow id, each {outcome?,
output?}: a batch's expected_outcome check and CEL checks (expected) use them.`,
		Example: `  agentplane datasets create checkout-regressions --agent checkout --since 7d
  agentplane datasets create triage-suite --workflow-ids wf_01JD…,wf_01JE… --expect expectations.json`,
		Args: args(1, "a dataset name"),
		RunE: func(cmd *cobra.Command, a []string) error {
			filterGiven := agent != "" || version != "" || outcome != "" || since.RFC3339() != "" || limit > 0
			if len(ids) == 0 && !filterGiven {
				return usagef("give --workflow-ids or a filter (--agent, --agent-version, --outcome, --since, --limit)")
			}
			if len(ids) > 0 && filterGiven {
				return usagef("give --workflow-ids or a filter, not both")
			}
			body := map[string]any{"name": a[0]}
			if description != "" {
				body["description"] = description
			}
			if len(ids) > 0 {
				body["workflow_ids"] = ids
			} else {
				sel := map[string]any{}
				for k, v := range map[string]string{"agent": agent, "agent_version": version, "outcome": outcome, "since": since.RFC3339()} {
					if v != "" {
						sel[k] = v
					}
				}
				if limit > 0 {
					sel["limit"] = limit
				}
				body["workflows"] = sel
			}
			if expect != "" {
				raw, err := os.ReadFile(expect)
				if err != nil {
					return usagef("--expect: %v", err)
				}
				var exp map[string]any
				if err := json.Unmarshal(raw, &exp); err != nil {
					return usagef("--expect %s is not a JSON object of expectations by workflow id ({\"wf_…\": {\"outcome\": \"cleared\"}}): %v", expect, err)
				}
				body["expectations"] = exp
			}
			method, path := http.MethodPost, "/v1/datasets"
			if next {
				method, path = http.MethodPut, "/v1/datasets/"+url.PathEscape(a[0])
				delete(body, "name")
			}
			_, err := c.send(cmd, method, path, body, nil, datasetTable)
			return err
		},
	}
	create.Flags().StringSliceVar(&ids, "workflow-ids", nil, "the dataset's workflows, in order (comma-separated or repeated)")
	create.Flags().StringVar(&agent, "agent", "", "workflows of this agent")
	create.Flags().StringVar(&version, "agent-version", "", "workflows that ran this version")
	create.Flags().StringVar(&outcome, "outcome", "", "workflows with this outcome")
	create.Flags().Var(since, "since", "workflows started from this time on: RFC 3339, or a duration before now (7d: the last week)")
	create.Flags().IntVar(&limit, "limit", 0, "most workflows (default and at most 10000)")
	create.Flags().StringVar(&expect, "expect", "", "a JSON file of expectations by workflow id: {\"wf_…\": {\"outcome\": …, \"output\": …}}")
	create.Flags().StringVar(&description, "description", "", "what the dataset is for")
	create.Flags().BoolVar(&next, "next", false, "make the next version of an existing dataset")

	listCmd := &cobra.Command{
		Use: "list", Short: "List datasets (their latest versions), by name", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.get(cmd, "/v1/datasets"+query("limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")),
				func(w io.Writer, doc map[string]any) error {
					rows(w, list(doc, "datasets"), "DATASET\tWORKFLOWS\tCREATED\tDESCRIPTION", "ref", "workflow_count", "created_at", "description")
					return nil
				})
		},
	}
	pageFlags(listCmd)

	get := &cobra.Command{
		Use: "get NAME[@VERSION]", Short: "Show a dataset version (the latest without @VERSION) with its workflows and expectations",
		Args: args(1, "a dataset, NAME or NAME@VERSION"), ValidArgsFunction: completeDataset,
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.get(cmd, "/v1/datasets/"+url.PathEscape(a[0]), datasetTable)
		},
	}
	cmd.AddCommand(create, listCmd, get)
	return cmd
}

// datasetTable shows a dataset version: its workflows and expectations.
func datasetTable(w io.Writer, doc map[string]any) error {
	fmt.Fprintf(w, "dataset %s (%s): %s workflows\n", field(doc, "ref"), field(doc, "id"), field(doc, "workflow_count"))
	if d := field(doc, "description"); d != "" {
		fmt.Fprintln(w, d)
	}
	exp, _ := doc["expectations"].(map[string]any)
	ids, _ := doc["workflow_ids"].([]any)
	if len(ids) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nWORKFLOW\tEXPECTED OUTCOME\tEXPECTED OUTPUT")
	for _, id := range ids {
		s, _ := id.(string)
		e, _ := exp[s].(map[string]any)
		out := ""
		if o, ok := e["output"]; ok {
			b, _ := json.Marshal(o)
			out = string(b)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s, field(e, "outcome"), out)
	}
	return tw.Flush()
}

// junitWanted reports whether a batch that ended with err (from
// waitBatch) has a report to write: it ended, well or badly.
func junitWanted(err error) bool {
	var ee exitError
	return err == nil || (errors.As(err, &ee) && ee.code != exitDetached)
}
