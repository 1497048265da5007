package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/telemetry/telemetrytest"
)

// TestGenAITelemetryReachesAnOTLPReceiver runs a server exporting to a
// real OTLP/HTTP receiver on loopback, invokes an agent and replays its
// workflow in a checked batch, stops the server (a clean shutdown flushes
// every signal), and finds at the receiver the workflow's invoke_agent span
// and the batch's gen_ai.evaluation.result event, both of the gen-ai 1.42
// schema and of the workflow's conversation.
func TestGenAITelemetryReachesAnOTLPReceiver(t *testing.T) {
	rcv := telemetrytest.NewReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	data, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-networks", "--shutdown-timeout", "5s")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--sub", "alice",
		"--scope", "agents:write agents:invoke workflows:read workflows:replay"},
		func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	def := json.RawMessage(`{"tools": [], "steps": [{"action": "note", "set": {"x": "1"}}], "outcome": "'noted'"}`)
	if code, body := srv.do("POST", "/v1/agents", tok, map[string]any{"name": "notes", "definition": def}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	code, wf := srv.do("POST", "/v1/agents/notes/invoke", tok, map[string]any{"goal": "note"})
	if code != 200 || wf["status"] != "completed" {
		t.Fatalf("invoke: %d %v", code, wf)
	}
	wfID := wf["workflow_id"].(string)
	code, created := srv.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "notes@1",
		"workflows": map[string]any{"agent": "notes", "limit": 1}, "checks": []map[string]any{{"name": "outcome_unchanged"}}})
	if code != 202 {
		t.Fatalf("create batch: %d %v", code, created)
	}
	batchID := created["id"].(string)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, b := srv.do("GET", "/v1/replay-batches/"+batchID, tok, nil)
		if b["status"] != "running" {
			if b["status"] != "completed" {
				t.Fatalf("batch: %v", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch still runs after 30 s")
		}
	}
	srv.stop()

	got := rcv.Received()
	traces, logs := got["/v1/traces"], got["/v1/logs"]
	var invoke map[string]any
	for _, s := range traces.Traces {
		if a := telemetrytest.SpanAttrs(s); s.GetName() == "invoke_agent notes" && a["gen_ai.conversation.id"] == wfID {
			invoke = a
		}
	}
	if invoke == nil || invoke["gen_ai.operation.name"] != "invoke_agent" || !slices.Contains(traces.Schemas, telemetry.GenAISchemaURL) {
		t.Errorf("no invoke_agent span of %s of the gen-ai schema among %v (schemas %v)", wfID, traces.Spans, traces.Schemas)
	}
	var found bool
	for _, l := range logs.Logs {
		a := telemetrytest.LogAttrs(l)
		if l.GetEventName() == "gen_ai.evaluation.result" && a["agentplane.batch_id"] == batchID {
			found = true
			if a["gen_ai.evaluation.name"] != "outcome_unchanged" || a["gen_ai.evaluation.score.label"] != "pass" ||
				a["gen_ai.conversation.id"] != wfID {
				t.Errorf("evaluation event %v", a)
			}
		}
	}
	if !found || !slices.Contains(logs.Schemas, telemetry.GenAISchemaURL) {
		t.Errorf("no evaluation event of batch %s among %v (schemas %v)", batchID, logs.Events, logs.Schemas)
	}
}
