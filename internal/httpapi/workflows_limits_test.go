package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/secrets"
	toolcall "github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// withWorkflowTimeout gives the server a runner whose workflows time out fast.
func withWorkflowTimeout(t *testing.T, timeout time.Duration) option {
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		policy, _ := secrets.NewPolicy([]string{"env://TOOL_*"}, false)
		resolver, err := secrets.NewResolver(secrets.Options{Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		r := workflow.New(workflow.Options{
			Store: d.Workflows, Versions: d.Agents, Tools: d.ToolStore, Timeout: timeout,
			Caller: toolcall.New(toolcall.Options{Client: outbound.New(outbound.Options{AllowPrivate: true}), Secrets: resolver}),
		})
		t.Cleanup(func() { r.Close(context.Background()) })
		d.Runner = r
	}
}

func TestWorkflowsPastTheirTimeLimitEndTimedOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withWorkflowTimeout(t, 300*time.Millisecond))
	w := newFraudWorld(t, h)
	w.gate = make(chan struct{}) // the first tool call never answers in time
	defer close(w.gate)
	wf := w.invoke(t, w.admin, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-slow"}})
	e, _ := wf["error"].(map[string]any)
	if wf["status"] != "failed" || wf["outcome"] != "timed_out" || e["code"] != "workflow-failed" {
		t.Fatalf("workflow %v", wf)
	}
}

func TestAClientDisconnectDoesNotStopTheWorkflow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx-8", 1500.0)
	release := gate(t, w)

	ctx, hangUp := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-8"}, "stream": true})
	req, _ := http.NewRequestWithContext(ctx, "POST", h.URL+"/v1/agents/fraud-triage/invoke", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("Workflow-Id")
	waitFor(t, func() bool { return w.payments.Load() == 1 })
	hangUp() // the client goes away mid-workflow
	resp.Body.Close()
	release()

	var wf map[string]any
	waitFor(t, func() bool {
		h.do("GET", "/v1/workflows/"+id, w.admin, nil).json(t, &wf)
		return wf["status"] != "running"
	})
	if wf["outcome"] != "escalated" || w.cases.Load() != 1 {
		t.Fatalf("workflow after the disconnect: %v (cases %d)", wf, w.cases.Load())
	}
	// Its events can be read again in full.
	r := h.do("GET", "/v1/workflows/"+id+"/events", w.admin, nil)
	n := 0
	for sc := bufio.NewScanner(bytes.NewReader(r.Body)); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("%d events after the disconnect: %s", n, r.Body)
	}
}
