package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentplane/agentplane/internal/a2a"
	"github.com/agentplane/agentplane/internal/webhook"
)

// A2AJSNodeModulesEnv names the node_modules directory holding the npm
// @a2a-js/sdk package and express (.ci/run installs @a2a-js/sdk@1.3.0 and
// express@5).
const A2AJSNodeModulesEnv = "AGENTPLANE_TEST_A2A_JS_NODE_MODULES"

// a2aJSNodeModules is the SDK's node_modules, or a skip (a failure under CI=1).
func a2aJSNodeModules(t *testing.T) (node, modules string) {
	t.Helper()
	modules = os.Getenv(A2AJSNodeModulesEnv)
	node, err := exec.LookPath("node")
	if modules == "" || err != nil {
		if os.Getenv("CI") == "1" {
			t.Fatalf("CI=1 needs node and %s (npm install --prefix DIR @a2a-js/sdk@1.3.0 express@5; DIR/node_modules)", A2AJSNodeModulesEnv)
		}
		t.Skipf("node or %s missing: npm install --prefix DIR @a2a-js/sdk@1.3.0 express@5 and set %s=DIR/node_modules", A2AJSNodeModulesEnv, A2AJSNodeModulesEnv)
	}
	return node, modules
}

// TestA2AWithTheJSSDK drives the official JS SDK, as a third-party client,
// against a real server: the card with a token, blocking and streaming
// messages over both bindings, an approval, a cancel.
func TestA2AWithTheJSSDK(t *testing.T) {
	t.Parallel()
	node, modules := a2aJSNodeModules(t)
	h := newHarness(t)
	w := newFraudWorld(t, h)
	// The refunds agent, with an output: the artifact a push notification carries.
	def := strings.Replace(refundsDef, `"outcome": "'refunded'"`, `"outcome": "'refunded'", "output": "{'transaction': txn.id, 'amount': txn.amount}"`, 1)
	if r := h.do("POST", "/v1/agents", w.admin, map[string]any{"name": "refunds", "definition": json.RawMessage(def)}); r.Status != 201 {
		t.Fatalf("deploy refunds: %d %s", r.Status, r.Body)
	}
	w.amounts.Store("tx-big", 900.0)
	var (
		mu       sync.Mutex
		received []*http.Request
		bodies   [][]byte
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		received, bodies = append(received, r), append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	args, _ := json.Marshal(map[string]string{
		"server": h.URL, "token": h.tokenFor("alice", "agents:invoke tool:*"), "hook": hook.URL,
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
	var steps []string
	var pushToken, pushTask string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Step           string      `json:"step"`
			Binding        string      `json:"binding"`
			Status         int         `json:"status"`
			Name           string      `json:"name"`
			Bindings       []string    `json:"bindings"`
			Task           a2aTaskJSON `json:"task"`
			DecisionStatus int         `json:"decision_status"`
			ID             string      `json:"id"`
			TaskID         string      `json:"task_id"`
			URL            string      `json:"url"`
			Token          string      `json:"token"`
			Listed         int         `json:"listed"`
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
		case "push_config":
			pushToken, pushTask = r.Token, r.TaskID
			if r.ID == "" || r.URL != hook.URL || r.Listed != 1 {
				t.Errorf("push config: %s", line)
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
	if strings.Join(steps, " ") != "card blocking stream blocking stream input_required push_config approved cancel" {
		t.Fatalf("the session's steps: %v\n%s", steps, stderr.String())
	}

	// The task's end reaches the config's URL through the webhook outbox as
	// an A2A StreamResponse holding the task, signed with the config's
	// token: the receiver verifies it.
	d := &webhook.Deliverer{Store: h.DB, Webhooks: h.DB, HTTP: http.DefaultClient, Timeout: 5 * time.Second, Format: a2a.PushBody}
	if n, err := d.RunOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("deliverer sent %d, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(received) != 1 {
		t.Fatalf("the receiver got %d deliveries", len(received))
	}
	verifier, err := standardwebhooks.NewWebhook(pushToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.Verify(bodies[0], received[0].Header); err != nil {
		t.Errorf("the delivery does not verify with the config's token: %v", err)
	}
	if ct := received[0].Header.Get("Content-Type"); ct != "application/a2a+json" {
		t.Errorf("the delivery's Content-Type is %q, want application/a2a+json (A2A 1.0.1)", ct)
	}
	if v := received[0].Header.Get("X-A2A-Notification-Token"); v != "" {
		t.Errorf("the delivery carries the signing secret in X-A2A-Notification-Token")
	}
	var payload map[string]json.RawMessage
	if err := json.Unmarshal(bodies[0], &payload); err != nil || len(payload) != 1 || payload["task"] == nil {
		t.Fatalf("the delivery is not a StreamResponse holding a task: %v %s", err, bodies[0])
	}
	// The SDK reads the body as a StreamResponse.
	recv := exec.CommandContext(t.Context(), node, "testdata/a2a_push_receiver.cjs")
	recv.Env = append(os.Environ(), "NODE_PATH="+modules)
	recv.Stdin = bytes.NewReader(bodies[0])
	read, err := recv.Output()
	if err != nil {
		t.Fatalf("the JS receiver: %v", err)
	}
	var got struct {
		Case string      `json:"case"`
		Task a2aTaskJSON `json:"task"`
	}
	if err := json.Unmarshal(read, &got); err != nil || got.Case != "task" {
		t.Fatalf("the JS SDK reads the delivery as %s (%v)", read, err)
	}
	task := got.Task
	if task.ID != pushTask || task.Status.State != "TASK_STATE_COMPLETED" || task.Metadata["outcome"] != "refunded" ||
		len(task.Artifacts) != 1 || task.Artifacts[0].ArtifactID != "output" || task.Artifacts[0].Parts[0].Data["transaction"] != "tx-big" || task.Artifacts[0].Parts[0].Data["amount"] != 900.0 {
		t.Errorf("the delivery, as the JS SDK reads it: %s\n%s", read, bodies[0])
	}
}

// a2aJSServer starts the JS SDK's A2A agent of testdata/a2a_server.cjs and
// returns its base URL.
func a2aJSServer(t *testing.T, node, modules string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), node, "testdata/a2a_server.cjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("the JS A2A server did not start: %q %v\n%s", line, err, stderr.String())
	}
	return "http://127.0.0.1:" + port
}

// TestA2AToolWithTheJSSDKServer registers the JS SDK's A2A agent as a tool
// of type a2a: its skills are operations, a call is recorded with the
// remote task, a task that asks for input is a step error with its own
// error_code, and a dry-run replay sends it nothing.
func TestA2AToolWithTheJSSDKServer(t *testing.T) {
	t.Parallel()
	node, modules := a2aJSNodeModules(t)
	remote := a2aJSServer(t, node, modules)
	requests := func() int {
		r, err := http.Get(remote + "/requests")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var n struct{ Requests int }
		json.NewDecoder(r.Body).Decode(&n)
		return n.Requests
	}
	h := newHarness(t)
	admin := h.token("acme", adminScopes+" workflows:replay")

	r := h.do("POST", "/v1/tools", admin, map[string]any{"name": "greeter", "type": "a2a", "spec_url": remote + "/.well-known/agent-card.json"})
	var tl struct {
		ID         string `json:"id"`
		Operations int    `json:"operations"`
	}
	r.json(t, &tl)
	if r.Status != 201 || tl.Operations != 2 {
		t.Fatalf("register: %d %s; want 201 with 2 operations", r.Status, r.Body)
	}
	var ops struct {
		Operations []struct{ ID, Kind, Summary string }
	}
	h.do("GET", "/v1/tools/"+tl.ID+"/operations", admin, nil).json(t, &ops)
	kinds := map[string]string{}
	for _, o := range ops.Operations {
		kinds[o.ID] = o.Kind + " " + o.Summary
	}
	if kinds["greet"] != "write Greet someone" || kinds["ask"] != "write Ask back" {
		t.Errorf("operations: %v", kinds)
	}
	if r := h.do("POST", "/v1/tools", admin, map[string]any{"name": "inline", "type": "a2a", "spec": "{}"}); r.Status != 422 {
		t.Errorf("an inline card: %d %s", r.Status, r.Body)
	}

	def := `{"tools": ["greeter"], "steps": [
	  {"action": "greet", "call": "greeter.greet", "args": {"message": "goal", "data": "{'name': context.name}"}, "save_as": "greeting"},
	  {"action": "ask", "call": "greeter.ask", "args": {"message": "'and then?'"}, "on_error": "continue"}],
	 "outcome": "'greeted'", "output": "greeting.artifacts[0].parts[0].data"}`
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "caller", "definition": json.RawMessage(def)}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	r = h.do("POST", "/v1/agents/caller/invoke", admin, map[string]any{"goal": "say hello", "context": map[string]any{"name": "Ada"}})
	var wf struct {
		WorkflowID string         `json:"workflow_id"`
		Outcome    string         `json:"outcome"`
		Output     map[string]any `json:"output"`
		Steps      []struct {
			Status    string `json:"status"`
			ErrorCode string `json:"error_code"`
			Error     string `json:"error"`
		} `json:"steps"`
	}
	r.json(t, &wf)
	if r.Status != 200 || wf.Outcome != "greeted" || wf.Output["greeting"] != "hello Ada" || len(wf.Steps) != 2 ||
		wf.Steps[0].Status != "ok" || wf.Steps[1].Status != "error" || wf.Steps[1].ErrorCode != "input_required" ||
		!strings.Contains(wf.Steps[1].Error, "which language?") {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}
	detail := h.do("GET", "/v1/workflows/"+wf.WorkflowID, admin, nil)
	if !strings.Contains(string(detail.Body), `"method":"SendMessage"`) || !strings.Contains(string(detail.Body), `TASK_STATE_COMPLETED`) {
		t.Errorf("the history does not hold the SendMessage and its task: %s", detail.Body)
	}

	before := requests()
	rp := h.do("POST", "/v1/workflows/"+wf.WorkflowID+"/replay", admin, map[string]any{"target_agent_version": "caller@1"})
	if rp.Status != 201 || !strings.Contains(string(rp.Body), `"replay_outcome":"greeted"`) || !strings.Contains(string(rp.Body), `"steps_changed":0`) {
		t.Errorf("replay: %d %s", rp.Status, rp.Body)
	}
	if got := requests() - before; got != 0 {
		t.Errorf("the dry-run replay sent %d requests to the remote A2A agent", got)
	}
}
