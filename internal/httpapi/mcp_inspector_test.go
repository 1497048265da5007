package httpapi_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMCPInspectorCLI lets a third-party client, the official MCP
// inspector in CLI mode, list and call the tenant's tools over real HTTP.
// AGENTPLANE_TEST_MCP_INSPECTOR is the path of its mcp-inspector binary
// (.ci/run installs @modelcontextprotocol/inspector@2.12.0).
func TestMCPInspectorCLI(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("AGENTPLANE_TEST_MCP_INSPECTOR")
	if bin == "" {
		t.Skip("AGENTPLANE_TEST_MCP_INSPECTOR is unset: npm install @modelcontextprotocol/inspector@2.12.0 and point it at node_modules/.bin/mcp-inspector")
	}
	h := newHarness(t)
	w := newFraudWorld(t, h)
	w.amounts.Store("tx_5", 75.0)
	tok := h.token("acme", "mcp:use agents:invoke tool:*")
	inspect := func(args ...string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		base := []string{"--cli", h.URL + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + tok}
		out, err := exec.CommandContext(ctx, bin, append(base, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("mcp-inspector %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var doc map[string]any
		if err := json.Unmarshal(out[strings.IndexByte(string(out), '{'):], &doc); err != nil {
			t.Fatalf("mcp-inspector %s printed %s: %v", strings.Join(args, " "), out, err)
		}
		return doc
	}

	list := inspect("--method", "tools/list")
	var names []string
	for _, tl := range list["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "agent_fraud-triage,call_operation,search_operations" {
		t.Errorf("tools/list: %v", names)
	}
	before := w.payments.Load()
	call := inspect("--method", "tools/call", "--tool-name", "call_operation",
		"--tool-arg", "tool=payments", "--tool-arg", "operation=getTransaction", `--tool-arg`, `args={"id": "tx_5"}`)
	sc, _ := call["structuredContent"].(map[string]any)
	if call["isError"] == true || sc["status"] != "ok" || w.payments.Load()-before != 1 {
		t.Errorf("tools/call call_operation: %v (payments calls %d)", call, w.payments.Load()-before)
	}
}
