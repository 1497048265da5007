package httpapi_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A2AJSNodeModulesEnv names the node_modules directory holding the npm
// @a2a-js/sdk package (.ci/run installs @a2a-js/sdk@1.3.0).
const A2AJSNodeModulesEnv = "AGENTPLANE_TEST_A2A_JS_NODE_MODULES"

// a2aJSNodeModules is the SDK's node_modules, or a skip (a failure under CI=1).
func a2aJSNodeModules(t *testing.T) (node, modules string) {
	t.Helper()
	modules = os.Getenv(A2AJSNodeModulesEnv)
	node, err := exec.LookPath("node")
	if modules == "" || err != nil {
		if os.Getenv("CI") == "1" {
			t.Fatalf("CI=1 needs node and %s (npm install --prefix DIR @a2a-js/sdk@1.3.0; DIR/node_modules)", A2AJSNodeModulesEnv)
		}
		t.Skipf("node or %s missing: npm install --prefix DIR @a2a-js/sdk@1.3.0 and set %s=DIR/node_modules", A2AJSNodeModulesEnv, A2AJSNodeModulesEnv)
	}
	return node, modules
}

// TestA2AWithTheJSSDK drives the official JS SDK, as a third-party client,
// against a real server: the card with a token, blocking and streaming
// messages over both bindings, an approval, a cancel.
func TestA2AWithTheJSSDK(t *testing.T) {
	node, modules := a2aJSNodeModules(t)
	h := newHarness(t)
	w := newFraudWorld(t, h)
	deployRefunds(t, w)
	w.amounts.Store("tx-big", 900.0)
	args, _ := json.Marshal(map[string]string{
		"server": h.URL, "token": h.tokenFor("alice", "agents:invoke tool:*"),
		"approver": h.tokenFor("bob", "workflows:approve approve:refunds"),
	})
	cmd := exec.CommandContext(t.Context(), node, "testdata/a2a_client.cjs", string(args))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s\n%s", err, out, stderr.String())
	}
	type task struct {
		ID     string `json:"id"`
		Status struct {
			State   string `json:"state"`
			Message *struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
		} `json:"status"`
		Artifacts []struct {
			Parts []struct {
				Data map[string]any `json:"data"`
			} `json:"parts"`
		} `json:"artifacts"`
		Metadata map[string]any `json:"metadata"`
	}
	var steps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Step           string   `json:"step"`
			Binding        string   `json:"binding"`
			Status         int      `json:"status"`
			Name           string   `json:"name"`
			Bindings       []string `json:"bindings"`
			Task           task     `json:"task"`
			DecisionStatus int      `json:"decision_status"`
			Events         []struct {
				Kind  string `json:"kind"`
				Event struct {
					Status struct {
						State string `json:"state"`
					} `json:"status"`
					Metadata struct {
						Step struct {
							Action string `json:"action"`
						} `json:"step"`
					} `json:"metadata"`
				} `json:"event"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		steps = append(steps, r.Step)
		switch r.Step {
		case "card":
			if r.Status != 200 || r.Name != "fraud-triage" || strings.Join(r.Bindings, ",") != "JSONRPC,HTTP+JSON" {
				t.Errorf("card: %s", line)
			}
		case "blocking":
			if r.Task.Status.State != "TASK_STATE_COMPLETED" || len(r.Task.Artifacts) != 1 || r.Task.Artifacts[0].Parts[0].Data["queue"] != "standard" ||
				r.Task.Metadata["outcome"] != "cleared" {
				t.Errorf("blocking over %s: %s", r.Binding, line)
			}
		case "stream":
			var got []string
			for _, e := range r.Events {
				got = append(got, strings.TrimSuffix(e.Kind+":"+e.Event.Status.State+":"+e.Event.Metadata.Step.Action, "::"))
			}
			want := "task:TASK_STATE_WORKING: statusUpdate:TASK_STATE_WORKING:fetch_transaction statusUpdate:TASK_STATE_WORKING:fraud_score " +
				"statusUpdate:TASK_STATE_WORKING:route_queue artifactUpdate statusUpdate:TASK_STATE_COMPLETED:"
			if strings.Join(got, " ") != want {
				t.Errorf("stream over %s:\n got %s\nwant %s", r.Binding, strings.Join(got, " "), want)
			}
		case "input_required":
			if r.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" || r.Task.Status.Message == nil || r.Task.Status.Message.Parts[0].Text != "Refund of 900" {
				t.Errorf("approval: %s", line)
			}
		case "approved":
			if r.DecisionStatus != 200 || r.Task.Status.State != "TASK_STATE_COMPLETED" || r.Task.Metadata["outcome"] != "refunded" {
				t.Errorf("after the decision: %s", line)
			}
		case "cancel":
			if r.Task.Status.State != "TASK_STATE_CANCELED" {
				t.Errorf("cancel: %s", line)
			}
		}
	}
	if strings.Join(steps, " ") != "card blocking stream blocking stream input_required approved cancel" {
		t.Errorf("the session's steps: %v\n%s", steps, stderr.String())
	}
}
