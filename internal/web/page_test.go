package web

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/workflow"
)

// fixtureReplay is testdata/replay.json: one step of each kind; the risk and
// mail tools' bodies carry markers that must not leak when hidden.
func fixtureReplay(t *testing.T) *replay.Replay {
	t.Helper()
	b, err := os.ReadFile("testdata/replay.json")
	if err != nil {
		t.Fatal(err)
	}
	var r replay.Replay
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func render(t *testing.T, p ReplayPage) string {
	t.Helper()
	var b strings.Builder
	if err := RenderReplay(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// text returns the text of the element with the given id.
func text(t *testing.T, page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no element with id %q", id)
	}
	return html.UnescapeString(m[1])
}

func TestRenderReplay(t *testing.T) {
	r := fixtureReplay(t)
	page := render(t, ReplayPage{Replay: r, Agent: "refunds", Goal: "Refund order ord_8812 <now>", Tools: NewTools("orders", "payments")})

	for id, want := range map[string]string{
		"workflow-id":        "wf_01JQ7Y2A1B2C3D4E5F6G7H8J9K",
		"original-version":   "refunds@3",
		"target-version":     "refunds@4",
		"original-outcome":   "refunded",
		"replay-outcome":     "escalated",
		"outcome-verdict":    "Outcome changed",
		"steps-added":        "2",
		"steps-changed":      "1",
		"steps-removed":      "1",
		"tool-calls-changed": "2",
		"goal":               "Refund order ord_8812 <now>",
	} {
		if got := text(t, page, id); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}

	for _, want := range []string{
		`<tr class="row kind-same">`, `<tr class="row kind-changed">`, `<tr class="row kind-removed">`, `<tr class="row kind-added">`,
		`<span class="label">= same</span>`, `<span class="label">≠ changed</span>`, `<span class="label">&#43; added</span>`, `<span class="label">− removed</span>`,
		`<li>score</li><li>result</li>`,
		`<code>orders.getOrder</code>`, `<code>risk.scoreOrder</code>`, `<dd>manual-review</dd>`, `<dd>0.91</dd>`,
		`not in the original run`, `not in the replay`,
		`Bodies hidden: the link's creator did not hold <code>tool:risk</code>.`,
		`Bodies hidden: the link's creator did not hold <code>tool:mail</code>.`,
		`&#34;refund_id&#34;: &#34;re_5521&#34;`, // a visible tool's response, indented
		`&lt;b&gt;Ada&lt;/b&gt; &amp; co`,        // a body's markup, escaped
		`href="` + stylesheet + `"`,
		`<a id="version-diff" href="/console/agents/refunds/diff?from=3&amp;to=4">what changed between the versions</a>`,
		// The added step that was not made keeps its own failure colour.
		`<div class="step step-failed">
  <p class="head"><span class="side-name">Replay</span> <span class="num">#4</span> <strong class="action">notify_customer</strong>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	for _, hidden := range []string{"RISK-SECRET", "MAIL-SECRET", "<b>Ada", "<now>"} {
		if strings.Contains(page, hidden) {
			t.Errorf("page shows %q", hidden)
		}
	}
	// CSP default-src 'self': no inline script or style, nothing loaded from elsewhere.
	for _, banned := range []string{"<script", "<style", " style=", "javascript:"} {
		if strings.Contains(page, banned) {
			t.Errorf("page contains %q", banned)
		}
	}
	if m := regexp.MustCompile(`(src|href)="(https?:)?//[^"]*"`).FindString(page); m != "" {
		t.Errorf("page loads %s", m)
	}
}

func TestVersionDiffLink(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"refunds@3", "refunds@4", "/console/agents/refunds/diff?from=3&to=4"},
		{"a b@1", "a b@2", "/console/agents/a%20b/diff?from=1&to=2"},
		{"refunds@3", "refunds@3", ""},
		{"refunds@3", "triage@4", ""},
		{"", "refunds@4", ""},
	} {
		if got := VersionDiffLink(tc.from, tc.to); got != tc.want {
			t.Errorf("VersionDiffLink(%q, %q) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
	if page := render(t, ReplayPage{Replay: &replay.Replay{ID: "rpl_1", WorkflowID: "wf_1", OriginalVersion: "x@1", Target: "x@1"}}); strings.Contains(page, "version-diff") {
		t.Error("a replay on the original's version links a diff")
	}
}

func TestRenderReplayAllTools(t *testing.T) {
	page := render(t, ReplayPage{Replay: fixtureReplay(t), Tools: NewTools("*")})
	for _, want := range []string{"RISK-SECRET-ARGS", "RISK-SECRET-REQUEST", "RISK-SECRET-RESULT", "MAIL-SECRET-TEMPLATE"} {
		if !strings.Contains(page, want) {
			t.Errorf("page with tools=* lacks %s", want)
		}
	}
	if strings.Contains(page, "Bodies hidden") {
		t.Error("page with tools=* hides bodies")
	}
}

func TestRenderReplayEmpty(t *testing.T) {
	r := &replay.Replay{ID: "rpl_1", WorkflowID: "wf_1", OriginalOutcome: "done", ReplayOutcome: "done", ReplayError: "inputs rejected"}
	page := render(t, ReplayPage{Replay: r})
	for id, want := range map[string]string{"outcome-verdict": "Outcome unchanged", "steps-added": "0", "tool-calls-changed": "0"} {
		if got := text(t, page, id); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	for _, want := range []string{"Neither run has any step.", "inputs rejected"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestAssets(t *testing.T) {
	srv := httptest.NewServer(Assets())
	t.Cleanup(srv.Close)
	tests := []struct {
		path        string
		status      int
		contentType string
		cache       string
	}{
		{stylesheet, http.StatusOK, "text/css; charset=utf-8", "public, max-age=31536000, immutable"},
		{AssetsPath + "viewer.css", http.StatusOK, "text/css; charset=utf-8", "no-cache"},
		{AssetsPath, http.StatusNotFound, "", ""},
		{AssetsPath + "missing.css", http.StatusNotFound, "", ""},
		{AssetsPath + "../templates/replay.html", http.StatusNotFound, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != http.StatusOK {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tc.contentType)
			}
			if got := resp.Header.Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control = %q, want %q", got, tc.cache)
			}
			if !strings.Contains(string(body), ".kind-changed") {
				t.Error("stylesheet lacks .kind-changed")
			}
		})
	}
}

func TestRefusedLinkPageSaysHowToGetAFreshLink(t *testing.T) {
	for _, tc := range []struct {
		kind, id string
		expired  bool
		want     []string
	}{
		{KindReplay, "rpl_1", true, []string{"This link has expired", "--viewer-ttl", "agentplane replays get rpl_1"}},
		{KindReplay, "rpl_2", false, []string{"This link does not open a page", "agentplane replays get rpl_2"}},
		{KindBatch, "rpb_3", true, []string{"batch report", "agentplane batches get rpb_3"}},
	} {
		var b strings.Builder
		if err := RenderRefusedLink(&b, tc.kind, tc.id, tc.expired); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s %s (expired %v): page lacks %q", tc.kind, tc.id, tc.expired, w)
			}
		}
	}
}

// TestRenderReplayErrorCode: a failed step shows its error and its stable code.
func TestRenderReplayErrorCode(t *testing.T) {
	failedCall := &workflow.Step{Step: 1, Action: "fetch", Kind: "call", Status: "error", Tool: "orders", Operation: "getOrder",
		Error: "the circuit of orders is open", ErrorCode: "circuit_open"}
	r := &replay.Replay{ID: "rpl_1", WorkflowID: "wf_1", OriginalOutcome: "failed", ReplayOutcome: "failed",
		Steps: []replay.Entry{{Kind: replay.Same, Original: failedCall, Replay: failedCall}}}
	page := render(t, ReplayPage{Replay: r, Agent: "refunds", Tools: NewTools("orders")})
	if !strings.Contains(page, `the circuit of orders is open <code class="error-code">circuit_open</code>`) {
		t.Errorf("the page lacks the step's error code")
	}
}

// TestRenderFaults marks a step a fault answered, naming the fault, and
// lists a replay's and a batch's faults, escaped.
func TestRenderFaults(t *testing.T) {
	rate := 0.5
	faults := []fault.Fault{
		{Tool: "payments", Operation: "getTransaction", When: "args.note == '<b>x</b>'", Rate: &rate, Result: fault.Result{Status: 503}},
		{Tool: "cases", Result: fault.Result{Error: fault.ErrorTimeout}},
	}
	recorded := &workflow.Step{Step: 1, Action: "fetch", Kind: "call", Status: "ok", Tool: "payments", Operation: "getTransaction", HTTPStatus: 200, Sent: true}
	injected := &workflow.Step{Step: 1, Action: "fetch", Kind: "call", Status: "error", Tool: "payments", Operation: "getTransaction",
		Error: "the API answered 503 Service Unavailable", ErrorCode: "upstream_error", HTTPStatus: 503, Injected: &fault.Injected{Fault: 0, Status: 503}}
	timedOut := &workflow.Step{Step: 2, Action: "open", Kind: "call", Status: "error", Tool: "cases", Operation: "createCase",
		ErrorCode: "timeout", Injected: &fault.Injected{Fault: 1, Error: fault.ErrorTimeout}}
	r := &replay.Replay{ID: "rpl_1", WorkflowID: "wf_1", OriginalOutcome: "cleared", ReplayOutcome: "failed", Faults: faults,
		Steps: []replay.Entry{{Kind: replay.Changed, Fields: []string{"status", "injected"}, Original: recorded, Replay: injected},
			{Kind: replay.Added, Replay: timedOut}}}
	page := render(t, ReplayPage{Replay: r, Tools: NewTools("payments", "cases")})
	for _, want := range []string{
		`<code>faults[0]</code> payments.getTransaction → 503 at rate 0.5 when <code>args.note == &#39;&lt;b&gt;x&lt;/b&gt;&#39;</code>; <code>faults[1]</code> cases → timeout`,
		`<div class="injected"><dt>injected</dt><dd>faults[0]: status 503; the call was not sent</dd></div>`,
		`<div class="injected"><dt>injected</dt><dd>faults[1]: timeout; the call was not sent</dd></div>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if n := strings.Count(page, `<span class="injected-badge">fault injected</span>`); n != 2 {
		t.Errorf("%d steps marked injected, want 2 (not the recorded one)", n)
	}

	b := replay.NewBatch("acme", "triage@2", 1, replay.Creator{}, time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC))
	b.Spec.Faults = faults
	var out strings.Builder
	if err := RenderBatch(&out, BatchPage{Batch: b, Link: func(id string) string { return "/replays/" + id }}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `<dd id="batch-faults"><code>faults[0]</code> payments.getTransaction → 503`) {
		t.Errorf("the batch report does not list its faults")
	}
}
