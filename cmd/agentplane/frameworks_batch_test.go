package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/google/go-cmp/cmp"
)

// frameworkBatchSize is how many workflows the batch test records and
// replays, spread over the three frameworks.
const frameworkBatchSize = 200

// TestExternalAgentsBatchThroughCLI records 200 workflows of the three
// framework agents, deployed as versions 1 (LangGraph.js), 2 (the OpenAI
// Agents SDK, Responses) and 3 (the Vercel AI SDK, Anthropic Messages) of
// one agent, each a long-lived Node process serving many runs. It then
// replays them all, as one dry batch through the CLI with the model live,
// against version 4: the LangGraph agent with new instructions. The checks
// are built-ins and a CEL check; the gate on output_unchanged fails, so the
// CLI exits 5 and writes a JUnit report valid against the schema. The tool
// receives no request; every recorded answer reaches the framework; the
// model is asked twice a replay with the new instructions; the batch's
// delta and check totals equal those the test computes from each replay's
// steps and its original's stored ones.
func TestExternalAgentsBatchThroughCLI(t *testing.T) {
	t.Parallel()
	node, modules := frameworks(t)
	dir, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", dir, "--allow-private-networks", "--rate-limit", "1000000")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--addr", addr, "--tenant", "acme", "--scope",
		"tools:write models:write agents:read agents:write agents:invoke workflows:read workflows:replay tool:*"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	ledger := newLedgerAPI(t)
	if code, body := srv.do("POST", "/v1/tools", tok, map[string]any{"name": "ledger", "type": "openapi",
		"spec_url": ledger.srv.URL + "/openapi.json"}); code != 201 {
		t.Fatalf("register the tool: %d %v", code, body)
	}
	gpt, claude := llmtest.NewOpenAIServer(t, frameworkScript), llmtest.NewAnthropicServer(t, frameworkScript)
	for name, m := range map[string]struct {
		provider string
		srv      *llmtest.Server
	}{"helper": {"openai", gpt}, "claude": {"anthropic", claude}} {
		if code, body := srv.do("POST", "/v1/models", tok, map[string]any{"name": name, "provider": m.provider,
			"base_url": m.srv.URL, "model": "test-model"}); code != 201 {
			t.Fatalf("register the model %s: %d %v", name, code, body)
		}
	}
	versions := []struct{ example, model string }{{"langgraph", "helper"}, {"openai-agents", "helper"}, {"vercel-ai", "claude"}}
	deploy := func(example, model string, env ...string) {
		agentURL := startExample(t, node, modules, example, append([]string{"MODEL=" + model}, env...)...)
		if code, body := srv.do("POST", "/v1/agents", tok, map[string]any{"name": "ledger-helper", "external": map[string]any{
			"url": agentURL, "tools": []string{"ledger"}, "models": []string{"helper", "claude"}, "timeout": "2m", "max_attempts": 1}}); code != 201 {
			t.Fatalf("deploy %s: %d %v", example, code, body)
		}
	}
	for _, v := range versions {
		deploy(v.example, v.model)
	}
	deploy("langgraph", "helper", "INSTRUCTIONS="+instructionsV2)

	start := time.Now()
	ids := recordFrameworkRuns(t, srv, tok, len(versions))
	t.Logf("recorded %d workflows of the three frameworks in %s", len(ids), time.Since(start).Round(time.Millisecond))
	originals := map[string]map[string]any{}
	for _, id := range ids {
		code, wf := srv.do("GET", "/v1/workflows/"+id, tok, nil)
		if steps, _ := wf["steps"].([]any); code != 200 || len(steps) != 4 {
			t.Fatalf("workflow %s: %d %v", id, code, wf)
		}
		originals[id] = wf
	}

	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: tok}
	junit := filepath.Join(e.dir, "replay.xml")
	toolBefore, gptBefore, claudeBefore := len(ledger.requests()), gpt.Count(), claude.Count()
	start = time.Now()
	stdout, stderr, code := e.run("replay", "--batch", "--target", "ledger-helper@4", "--agent", "ledger-helper",
		"--limit", fmt.Sprint(frameworkBatchSize), "--llm", "live", "--concurrency", "16",
		"--check", "outcome_unchanged", "--check", "same_tool_calls", "--check", "output_unchanged",
		"--check", `terse=size(replay.output.answer) < size(original.output.answer)`,
		"--gate", "outcome_unchanged=1", "--gate", "output_unchanged=0.5", "--junit", junit)
	t.Logf("replayed %d workflows as one batch through the CLI in %s", len(ids), time.Since(start).Round(time.Millisecond))
	if code != exitChanged || !strings.Contains(stdout, "verdict: failed") || !strings.Contains(stderr, "failed its checks") {
		t.Fatalf("replay --batch: exit %d, want %d\nstdout: %s\nstderr: %s", code, exitChanged, stdout, stderr)
	}
	if got := ledger.requests()[toolBefore:]; len(got) != 0 {
		t.Errorf("the tool received %d requests during the dry batch: %q", len(got), got[:min(len(got), 3)])
	}
	// Each replay asked the target's model twice, with the new
	// instructions, the second time carrying the recorded tool answer; the
	// Anthropic model of version 3 was asked nothing.
	reqs := gpt.Requests()[gptBefore:]
	if n := claude.Count() - claudeBefore; len(reqs) != 2*len(ids) || n != 0 {
		t.Fatalf("the models received %d and %d requests during the batch, want %d and 0", len(reqs), n, 2*len(ids))
	}
	answered := 0
	for _, r := range reqs {
		if !strings.Contains(string(r.Body), instructionsV2) {
			t.Fatalf("request %d lacks the new instructions:\n%s", r.N, r.Body)
		}
		if strings.Contains(r.Last().Content, `"settled"`) && strings.Contains(r.Last().Content, "42.5") {
			answered++
		}
	}
	if answered != len(ids) {
		t.Errorf("%d of the model's requests carried the recorded tool answer, want %d", answered, len(ids))
	}

	batchID := regexp.MustCompile(`rpb_[0-9A-Z]{26}`).FindString(stderr + stdout)
	code, b := srv.do("GET", "/v1/replay-batches/"+batchID, tok, nil)
	if code != 200 || b["status"] != "completed" || b["total"] != float64(len(ids)) || b["done"] != float64(len(ids)) {
		t.Fatalf("batch %q: %d %v", batchID, code, b)
	}
	// The totals the test computes from each replay's steps.
	want := frameworkBatchTotals(t, srv, tok, batchID, originals)
	var got frameworkTotals
	raw, _ := json.Marshal(b)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the batch's totals (-computed +batch):\n%s", diff)
	}
	t.Logf("the batch's totals: %+v", got)
	checkFrameworkJUnit(t, junit, ids, want)
}

// recordFrameworkRuns invokes versions 1..n of ledger-helper, 8 at a time,
// frameworkBatchSize runs in turn, and returns the workflows' ids.
func recordFrameworkRuns(t *testing.T, srv *child, tok string, n int) []string {
	t.Helper()
	ids := make([]string, frameworkBatchSize)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(ids); i = int(next.Add(1)) - 1 {
				body := strings.NewReader(`{"goal": "` + frameworkGoal + `"}`)
				req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/agents/ledger-helper@%d/invoke", srv.base, i%n+1), body)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				var wf struct {
					ID      string `json:"workflow_id"`
					Outcome string `json:"outcome"`
				}
				if err == nil {
					err = json.NewDecoder(resp.Body).Decode(&wf)
					resp.Body.Close()
				}
				if err != nil || wf.Outcome != "answered" {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("run %d of version %d: %s %v", i, i%n+1, wf.Outcome, err))
					mu.Unlock()
					return
				}
				ids[i] = wf.ID
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("recording: %s", strings.Join(errs, "; "))
	}
	return ids
}

// frameworkTotals are a batch's totals the test computes.
type frameworkTotals struct {
	Changed int `json:"changed"`
	Delta   struct {
		Added        int `json:"steps_added"`
		Changed      int `json:"steps_changed"`
		Removed      int `json:"steps_removed"`
		CallsChanged int `json:"tool_calls_changed"`
	} `json:"delta_totals"`
	Checks []struct {
		Name    string `json:"name"`
		Passed  int    `json:"passed"`
		Failed  int    `json:"failed"`
		Errored int    `json:"errored"`
	} `json:"checks"`
	Verdict string `json:"verdict"`
}

// frameworkBatchTotals pages the batch's replays and computes its totals:
// each replay's steps aligned with its original's stored steps at their
// place (every replay makes the original's four steps), a step changed
// when its facts differ; the checks from the replays' outcomes, outputs
// and calls.
func frameworkBatchTotals(t *testing.T, srv *child, tok, batchID string, originals map[string]map[string]any) frameworkTotals {
	t.Helper()
	var tot frameworkTotals
	checks := []string{"outcome_unchanged", "same_tool_calls", "output_unchanged", "terse"}
	passed := make([]int, len(checks))
	seen := 0
	for cursor := ""; ; {
		code, pg := srv.do("GET", "/v1/replay-batches/"+batchID+"/replays?limit=100&cursor="+cursor, tok, nil)
		if code != 200 {
			t.Fatalf("the batch's replays: %d %v", code, pg)
		}
		for _, r := range pg["replays"].([]any) {
			rp := r.(map[string]any)
			seen++
			id, _ := rp["workflow_id"].(string)
			orig, _ := originals[id]["steps"].([]any)
			steps, _ := rp["steps"].([]any)
			if len(steps) != len(orig) {
				t.Fatalf("replay of %s has %d steps, the original %d", id, len(steps), len(orig))
			}
			var calls, origCalls []string
			for i, s := range steps {
				st := s.(map[string]any)
				o, _ := st["original"].(map[string]any)
				p, _ := st["replay"].(map[string]any)
				if o == nil || p == nil || stepFacts(o) != stepFacts(orig[i].(map[string]any)) {
					t.Fatalf("replay of %s, step %d: %v does not align with the original's %v", id, i, st, orig[i])
				}
				if stepFacts(o) != stepFacts(p) {
					tot.Delta.Changed++
				}
				if o["operation"] != nil {
					origCalls = append(origCalls, callFacts(o, false))
				}
				if p["operation"] != nil {
					calls = append(calls, callFacts(p, false))
					if callFacts(o, true) != callFacts(p, true) {
						tot.Delta.CallsChanged++
					}
					if !strings.Contains(fmt.Sprint(p["result"]), "amount:42.5") {
						t.Errorf("replay of %s: the call's result %v is not the recorded answer", id, p["result"])
					}
				}
			}
			if len(calls) != 1 {
				t.Errorf("replay of %s made the calls %q, want one", id, calls)
			}
			if rp["original_outcome"] != rp["replay_outcome"] {
				tot.Changed++
			}
			origOut, _ := json.Marshal(originals[id]["output"])
			replayOut, _ := json.Marshal(rp["replay_output"])
			results := []bool{rp["original_outcome"] == rp["replay_outcome"], slices.Equal(origCalls, calls), string(origOut) == string(replayOut),
				len(answerOf(rp["replay_output"])) < len(answerOf(originals[id]["output"]))}
			for i, ok := range results {
				if ok {
					passed[i]++
				}
			}
		}
		if cursor, _ = pg["next_cursor"].(string); cursor == "" {
			break
		}
	}
	if seen != len(originals) {
		t.Fatalf("the batch lists %d replays, want %d", seen, len(originals))
	}
	for i, name := range checks {
		tot.Checks = append(tot.Checks, struct {
			Name    string `json:"name"`
			Passed  int    `json:"passed"`
			Failed  int    `json:"failed"`
			Errored int    `json:"errored"`
		}{name, passed[i], seen - passed[i], 0})
	}
	tot.Verdict = "passed"
	if passed[0] < seen || 2*passed[2] < seen {
		tot.Verdict = "failed"
	}
	return tot
}

// callFacts are the facts of a step's call that tool_calls_changed
// compares (tool, operation, canonical args and, withStatus, status), or
// that same_tool_calls does (without).
func callFacts(s map[string]any, withStatus bool) string {
	facts := []any{s["tool"], s["operation"], s["args"]}
	if withStatus {
		facts = append(facts, s["status"])
	}
	b, _ := json.Marshal(facts) // map keys sorted: canonical for these values
	return string(b)
}

// answerOf is a framework agent's answer in its output.
func answerOf(output any) string {
	m, _ := output.(map[string]any)
	s, _ := m["answer"].(string)
	return s
}

// checkFrameworkJUnit reads the JUnit report: one test case per workflow
// and check, a failure for each check a replay failed; then validates it
// against the schema.
func checkFrameworkJUnit(t *testing.T, path string, ids []string, want frameworkTotals) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name      string    `xml:"name,attr"`
			ClassName string    `xml:"classname,attr"`
			Failure   *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(raw, &suite); err != nil {
		t.Fatalf("the JUnit report is not XML: %v", err)
	}
	failures, cases := 0, map[string]int{}
	for _, c := range want.Checks {
		failures += c.Failed
	}
	for _, c := range suite.Cases {
		cases[c.Name]++
		if !slices.Contains(ids, c.ClassName) {
			t.Errorf("test case %s/%s names no replayed workflow", c.ClassName, c.Name)
		}
	}
	n := len(ids) * len(want.Checks)
	if suite.Tests != n || len(suite.Cases) != n || suite.Failures != failures {
		t.Errorf("JUnit: %d tests, %d cases (want %d), %d failures (want %d)", suite.Tests, len(suite.Cases), n, suite.Failures, failures)
	}
	for _, c := range want.Checks {
		if cases[c.Name] != len(ids) {
			t.Errorf("JUnit: %d test cases of %s, want %d", cases[c.Name], c.Name, len(ids))
		}
	}
	validateJUnit(t, path)
}
