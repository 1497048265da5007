package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentplane/agentplane/internal/client"
)

// Tenant is the demo's tenant.
const Tenant = "demo"

// Scopes are what the demo's token holds: everything the quickstart does.
var Scopes = []string{"tools:read", "tools:write", "agents:read", "agents:write", "agents:invoke",
	"workflows:read", "workflows:replay", "workflows:approve", "mcp:use", "audit:read",
	"models:read", "models:write", "usage:read", "tool:*"}

// ApproverScopes are what the demo's approver holds: a person other than
// the invoker (the approve step's four-eyes rule) allowed to approve refunds.
var ApproverScopes = []string{"workflows:read", "workflows:approve", RefundApproverScope}

// RefundApproverScope is what version 2's refund approval asks of its approver.
const RefundApproverScope = "approve:refunds"

// refundWhen is when the agent refunds: on request, unless escalated.
const refundWhen = "has(context.refund_requested) && context.refund_requested && queue != 'fraud-review'"

// agent is fraud-triage at a threshold, a refund limit and, when
// approveAbove is not 0, a person's approval for refunds above it: version 2
// raises the threshold from 1,000 to 5,000, lowers the refunds its
// financial policy allows from 5,000 to 1,000 and asks for approval above 500.
func agent(version string, threshold, refundLimit, approveAbove float64) map[string]any {
	steps := []map[string]any{
		{"action": "fetch_transaction", "call": "payments.getTransaction", "args": map[string]any{"id": "context.transaction_id"}, "save_as": "txn"},
		{"action": "fetch_customer", "call": "customers.customer", "args": map[string]any{"id": "txn.customer_id"}, "save_as": "customer"},
		{"action": "fraud_score", "score": fmt.Sprintf("txn.amount > %.1f ? (customer.riskScore > 0.5 ? 0.93 : 0.81) : (customer.riskScore > 0.5 ? 0.45 : 0.08)", threshold)},
		{"action": "route_queue", "route": []map[string]any{
			{"when": "score >= 0.8", "queue": "fraud-review"}, {"when": "score >= 0.4", "queue": "manual-review"}, {"queue": "standard"}}},
		{"action": "open_case", "when": "queue == 'fraud-review'", "call": "cases.OpenCase",
			"args": map[string]any{"transactionId": "txn.id", "queue": "queue", "reason": "'score ' + string(score)"}},
	}
	description := fmt.Sprintf("Fraud triage: escalate above %.0f, refund at most %.0f", threshold, refundLimit)
	if approveAbove > 0 {
		description += fmt.Sprintf(", approval above %.0f", approveAbove)
		steps = append(steps, map[string]any{"action": "refund_approval", "when": refundWhen, "approve": map[string]any{
			"when":           fmt.Sprintf("txn.amount > %.1f && txn.amount <= %.1f", approveAbove, refundLimit),
			"reason":         "'Refund of ' + string(txn.amount) + ' ' + txn.currency + ' on ' + txn.id + ' (' + txn.merchant + ')'",
			"approver_scope": RefundApproverScope, "timeout": "24h", "on_timeout": "deny"}})
	}
	steps = append(steps, map[string]any{"action": "refund", "when": refundWhen,
		"call": "payments.createRefund", "args": map[string]any{"transaction_id": "txn.id", "amount": "txn.amount"}, "on_denied": "continue"})
	return map[string]any{
		"name": "fraud-triage", "version": version,
		"description": description,
		"definition": map[string]any{
			"tools": []string{"payments", "customers", "cases"},
			"inputs": map[string]any{"type": "object", "required": []string{"transaction_id"}, "properties": map[string]any{
				"transaction_id": map[string]any{"type": "string"}, "refund_requested": map[string]any{"type": "boolean"}}},
			"policies": map[string]any{
				"financial": map[string]any{"allow": fmt.Sprintf("!has(args.amount) || args.amount <= %.1f", refundLimit)},
			},
			"steps":   steps,
			"outcome": "queue == 'fraud-review' ? 'escalated' : (queue == 'manual-review' ? 'review' : 'cleared')",
			"output":  "{'queue': queue, 'score': score}",
		},
	}
}

// ModelName is the name the demo model is registered under, speaking
// OpenAI's APIs (Chat Completions and Responses).
const ModelName = "demo"

// AnthropicModelName is the name the same demo model is registered under
// speaking Anthropic's Messages API, for agents written against it.
const AnthropicModelName = "demo-anthropic"

// Assistant is the demo's LLM agent.
const Assistant = "payments-assistant"

// assistant is the LLM agent at a version: one plan step choosing among
// the three APIs' read operations and opening a case, with instructions
// that differ between versions (version 2 opens a fraud case for a risky
// transaction), so a live what-if replay of version 1's history against
// version 2 shows what the new instructions change.
func assistant(version, modelName, instructions string) map[string]any {
	return map[string]any{
		"name": Assistant, "version": version,
		"description": "Answers the payments team's questions about a transaction (" + instructions + ")",
		"definition": map[string]any{
			"model":        modelName,
			"instructions": "'" + instructions + "'",
			"tools":        []string{"payments", "customers", "cases"},
			"steps": []map[string]any{{"action": "solve", "plan": map[string]any{
				"prompt": "goal", "save_as": "answer",
				"operations": []string{"payments.getTransaction", "customers.customer", "cases.OpenCase"}}}},
			"output":  "answer",
			"outcome": "answer.contains('fraud case') ? 'escalated' : 'answered'",
		},
	}
}

// assistantInstructions are version 1's instructions; version 2 adds CaseInstruction.
const assistantInstructions = "You help the payments team. Look the transaction up, then its customer, and answer in two sentences."

// assistantGoals make the LLM agent's history, against version 1.
var assistantGoals = []string{"What is tx_1001?", "Is tx_1002 risky?", "Look at tx_1003 for me", "Check tx_1004"}

// invocations make the demo's history, all against version 1.
var invocations = []map[string]any{
	{"transaction_id": "tx_1001"},
	{"transaction_id": "tx_1002"},
	{"transaction_id": "tx_1003"},
	{"transaction_id": "tx_1004"},
	{"transaction_id": "tx_1005", "refund_requested": true},
	{"transaction_id": "tx_1006", "refund_requested": true},
}

// Seeded is what Seed made.
type Seeded struct {
	// Workflows are the seeded workflows, by transaction id.
	Workflows map[string]string
	// ReplayExample is a workflow whose replay against version 2 changes.
	ReplayExample string
	// Model is the model the LLM agent uses; Assisted its workflows.
	Model    string
	Assisted []string
	// Coded are the external agent's workflows (none when it is not served).
	Coded []string
	// History counts fraud-triage's workflows, those of earlier runs on the
	// same data included; HistoryMore says there are more than it counted.
	History     int
	HistoryMore bool
	// Waiting is a fraud-triage workflow invoked after Seed that waits for
	// a person's approval, counted in History; "" when there is none.
	Waiting string
}

// Seed registers the APIs as tools (updating them when a previous run
// registered them, since their ports change), deploys fraud-triage 1 and
// 2 (kept when they exist) and invokes version 1 a few times, then does
// the same for the LLM agent, through cl. The LLM agent uses the named
// model, or with model "" the demo model, registered as ModelName.
func Seed(ctx context.Context, cl *client.Client, apis *APIs, model string, progress io.Writer) (*Seeded, error) {
	regs := []map[string]any{
		{"name": "payments", "type": "openapi", "spec_url": apis.Payments + "/openapi.json", "policy_class": "financial",
			"side_effects": []string{"create"}},
		{"name": "customers", "type": "graphql", "spec_url": apis.Customers + "/schema.graphql", "endpoint_url": apis.Customers + "/graphql"},
		{"name": "cases", "type": "soap", "spec_url": apis.Cases + "/cases.wsdl", "side_effects": []string{"create"}},
	}
	existing, err := toolIDs(ctx, cl)
	if err != nil {
		return nil, err
	}
	for _, reg := range regs {
		name := reg["name"].(string)
		req := client.Request{Method: http.MethodPost, Path: "/v1/tools", Body: reg}
		if id, ok := existing[name]; ok {
			req = client.Request{Method: http.MethodPut, Path: "/v1/tools/" + id, Body: reg}
		}
		var t struct {
			Operations int `json:"operations"`
		}
		if _, err := cl.JSON(ctx, req, &t); err != nil {
			return nil, fmt.Errorf("register %s: %w", name, err)
		}
		fmt.Fprintf(progress, "  tool %-10s %-8s %d operations\n", name, reg["type"], t.Operations)
	}
	for _, v := range []map[string]any{agent("1", 1000, 5000, 0), agent("2", 5000, 1000, 500)} {
		_, err := cl.Do(ctx, client.Request{Method: http.MethodPost, Path: "/v1/agents", Body: v})
		var p *client.Problem
		if errors.As(err, &p) && p.Status == http.StatusConflict {
			err = nil // deployed by an earlier run; versions never change
		}
		if err != nil {
			return nil, fmt.Errorf("deploy fraud-triage@%s: %w", v["version"], err)
		}
		fmt.Fprintf(progress, "  agent fraud-triage@%s  %s\n", v["version"], v["description"])
	}
	out := &Seeded{Workflows: map[string]string{}}
	for _, in := range invocations {
		var wf struct {
			ID      string `json:"workflow_id"`
			Outcome string `json:"outcome"`
		}
		tx := in["transaction_id"].(string)
		body := map[string]any{"goal": "triage " + tx, "context": in, "stream": false}
		if _, err := cl.JSON(ctx, client.Request{Method: http.MethodPost, Path: "/v1/agents/fraud-triage@1/invoke", Body: body}, &wf); err != nil {
			return nil, fmt.Errorf("invoke fraud-triage for %s: %w", tx, err)
		}
		out.Workflows[tx] = wf.ID
		fmt.Fprintf(progress, "  workflow %s  %s  %s\n", wf.ID, tx, wf.Outcome)
	}
	out.ReplayExample = out.Workflows["tx_1002"]
	if out.Model, err = seedAssistant(ctx, cl, apis, model, progress); err != nil {
		return nil, err
	}
	for _, goal := range assistantGoals {
		var wf struct {
			ID      string `json:"workflow_id"`
			Outcome string `json:"outcome"`
		}
		body := map[string]any{"goal": goal, "stream": false}
		if _, err := cl.JSON(ctx, client.Request{Method: http.MethodPost, Path: "/v1/agents/" + Assistant + "@1/invoke", Body: body}, &wf); err != nil {
			return nil, fmt.Errorf("invoke %s with %q: %w", Assistant, goal, err)
		}
		out.Assisted = append(out.Assisted, wf.ID)
		fmt.Fprintf(progress, "  workflow %s  %-24q %s\n", wf.ID, goal, wf.Outcome)
	}
	if apis.Agent != "" {
		if out.Coded, err = seedCoded(ctx, cl, apis, out.Model, progress); err != nil {
			return nil, err
		}
	}
	out.History, out.HistoryMore, err = countWorkflows(ctx, cl, "fraud-triage")
	if err != nil {
		return nil, err
	}
	return out, nil
}

// seedAssistant registers the demo model (unless model names another) and
// deploys the LLM agent's two versions; it returns the model's name.
func seedAssistant(ctx context.Context, cl *client.Client, apis *APIs, model string, progress io.Writer) (string, error) {
	if model == "" {
		model = ModelName
		for _, m := range []struct{ name, provider, baseURL string }{
			{ModelName, "openai", apis.Model},
			{AnthropicModelName, "anthropic", apis.AnthropicModel()},
		} {
			reg := map[string]any{"name": m.name, "provider": m.provider, "base_url": m.baseURL, "model": ModelID,
				"price": map[string]any{"input_per_mtok": 0.15, "output_per_mtok": 0.60}}
			_, err := cl.Do(ctx, client.Request{Method: http.MethodPost, Path: "/v1/models", Body: reg})
			var p *client.Problem
			if errors.As(err, &p) && p.Status == http.StatusConflict {
				// Registered by an earlier run: its port has changed.
				_, err = cl.Do(ctx, client.Request{Method: http.MethodPut, Path: "/v1/models/" + m.name, Body: reg})
			}
			if err != nil {
				return "", fmt.Errorf("register the demo model %s: %w", m.name, err)
			}
			fmt.Fprintf(progress, "  model %-14s %s at %s, %s API (%s)\n", m.name, ModelID, m.baseURL, m.provider, ModelLabel)
		}
	}
	for _, v := range []map[string]any{
		assistant("1", model, assistantInstructions),
		assistant("2", model, assistantInstructions+" "+CaseInstruction),
	} {
		_, err := cl.Do(ctx, client.Request{Method: http.MethodPost, Path: "/v1/agents", Body: v})
		var p *client.Problem
		if errors.As(err, &p) && p.Status == http.StatusConflict {
			err = nil // deployed by an earlier run
		}
		if err != nil {
			return "", fmt.Errorf("deploy %s@%s: %w", Assistant, v["version"], err)
		}
		fmt.Fprintf(progress, "  agent %s@%s  (LLM agent on model %s)\n", Assistant, v["version"], model)
	}
	return model, nil
}

// Coded is the demo's external agent: a Go program (goagent) that the
// demo serves itself, deployed as two external versions whose
// instructions differ as payments-assistant's do.
const Coded = "triage-code"

// seedCoded deploys the external agent's two versions (kept when they
// exist, as long as the agent still answers at their URL) and invokes
// version 1 with the assistant's goals; it returns the workflows.
func seedCoded(ctx context.Context, cl *client.Client, apis *APIs, model string, progress io.Writer) ([]string, error) {
	for _, version := range []string{"1", "2"} {
		v := map[string]any{"name": Coded, "version": version,
			"description": "Answers the payments team's questions, written in Go with openai-go and the MCP Go SDK (version " + version + ")",
			"external": map[string]any{"url": apis.Agent + "/" + version, "tools": []string{"payments", "customers", "cases"},
				"models": []string{model}, "timeout": "2m"}}
		_, err := cl.Do(ctx, client.Request{Method: http.MethodPost, Path: "/v1/agents", Body: v})
		var p *client.Problem
		if errors.As(err, &p) && p.Status == http.StatusConflict {
			err = nil // deployed by an earlier run
		}
		if err != nil {
			return nil, fmt.Errorf("deploy %s@%s: %w", Coded, version, err)
		}
		fmt.Fprintf(progress, "  agent %s@%s  (external agent at %s/%s)\n", Coded, version, apis.Agent, version)
	}
	var ids []string
	for _, goal := range assistantGoals {
		var wf struct {
			ID      string `json:"workflow_id"`
			Outcome string `json:"outcome"`
		}
		body := map[string]any{"goal": goal, "stream": false}
		if _, err := cl.JSON(ctx, client.Request{Method: http.MethodPost, Path: "/v1/agents/" + Coded + "@1/invoke", Body: body}, &wf); err != nil {
			return nil, fmt.Errorf("invoke %s with %q: %w", Coded, goal, err)
		}
		ids = append(ids, wf.ID)
		fmt.Fprintf(progress, "  workflow %s  %-24q %s\n", wf.ID, goal, wf.Outcome)
	}
	return ids, nil
}

// maxCounted bounds how many workflows countWorkflows pages through.
const maxCounted = 2000

// countWorkflows counts the agent's workflows, at most maxCounted; more
// says there are others beyond.
func countWorkflows(ctx context.Context, cl *client.Client, agentName string) (n int, more bool, err error) {
	cursor := ""
	for n < maxCounted {
		var page struct {
			Workflows  []json.RawMessage `json:"workflows"`
			NextCursor *string           `json:"next_cursor"`
		}
		path := "/v1/workflows?limit=200&agent=" + url.QueryEscape(agentName)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if _, err := cl.JSON(ctx, client.Request{Method: http.MethodGet, Path: path}, &page); err != nil {
			return 0, false, fmt.Errorf("count %s's workflows: %w", agentName, err)
		}
		n += len(page.Workflows)
		if page.NextCursor == nil {
			return n, false, nil
		}
		cursor = *page.NextCursor
	}
	return n, true, nil
}

// toolIDs maps the tenant's tool names to their ids.
func toolIDs(ctx context.Context, cl *client.Client) (map[string]string, error) {
	var page struct {
		Tools []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if _, err := cl.JSON(ctx, client.Request{Method: http.MethodGet, Path: "/v1/tools?limit=200"}, &page); err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	ids := map[string]string{}
	for _, t := range page.Tools {
		ids[t.Name] = t.ID
	}
	return ids, nil
}

// Ready is the block printed when the demo is ready: how to point the
// client at it and four things to try.
func Ready(w io.Writer, baseURL, token, approverToken string, s *Seeded) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nagentplane demo is ready: three example APIs on loopback are registered as tools,\n")
	history := fmt.Sprint(s.History)
	if s.HistoryMore {
		history = "over " + history
	}
	fmt.Fprintf(&b, "fraud-triage 1 (the default) and 2 are deployed, and %s workflows make its history", history)
	invoked := len(s.Workflows)
	if s.Waiting != "" {
		invoked++
	}
	if s.History != invoked {
		fmt.Fprintf(&b, " (%d of them invoked just now)", invoked)
	}
	if s.Waiting != "" {
		b.WriteString(", one a refund waiting for approval")
	}
	b.WriteString(".\n")
	if s.Model != "" {
		fmt.Fprintf(&b, "%s, an LLM agent on model %s, is deployed in two versions with %d workflows of version 1.\n", Assistant, s.Model, len(s.Assisted))
	}
	if len(s.Coded) > 0 {
		fmt.Fprintf(&b, "%s, the same assistant written in Go, runs as an external agent in two versions with %d workflows of version 1.\n", Coded, len(s.Coded))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "Paste into another terminal (use `go run ./cmd/agentplane` for `agentplane` if it is not installed):\n\n")
	fmt.Fprintf(&b, "  export AGENTPLANE_URL=%s\n  export AGENTPLANE_TOKEN=%s\n\n", baseURL, token)
	fmt.Fprintf(&b, "  # 1. watch an agent's steps stream in\n")
	fmt.Fprintf(&b, "  agentplane invoke fraud-triage --goal \"triage tx_1003\" --context transaction_id=tx_1003 --stream\n\n")
	fmt.Fprintf(&b, "  # 2. replay a past workflow against version 2: what would change?\n")
	fmt.Fprintf(&b, "  agentplane replay %s --target fraud-triage@2\n", s.ReplayExample)
	fmt.Fprintf(&b, "  #    (the same with curl:)\n")
	fmt.Fprintf(&b, "  curl -s $AGENTPLANE_URL/v1/workflows/%s/replay -H \"Authorization: Bearer $AGENTPLANE_TOKEN\" \\\n", s.ReplayExample)
	fmt.Fprintf(&b, "    -H 'Content-Type: application/json' -d '{\"target_agent_version\": \"fraud-triage@2\"}'\n\n")
	fmt.Fprintf(&b, "  # 3. open the viewer_url the replay printed in a browser: both runs side by side\n\n")
	fmt.Fprintf(&b, "  # 4. replay the whole history against version 2, as a release gate in CI would\n")
	fmt.Fprintf(&b, "  #    (exit 5 when an outcome changed; the report link opens the outcome matrix)\n")
	fmt.Fprintf(&b, "  agentplane replay --batch --target fraud-triage@2 --agent fraud-triage --fail-on-change\n\n")
	fmt.Fprintf(&b, "  # 5. version 2 asks a person to approve refunds above 500: the workflow waits\n")
	fmt.Fprintf(&b, "  agentplane invoke fraud-triage@2 --goal \"refund tx_1007\" --context transaction_id=tx_1007 --context refund_requested=true\n")
	fmt.Fprintf(&b, "  agentplane approvals list --status pending\n")
	fmt.Fprintf(&b, "  #    you invoked it, so another person approves (this token is the demo's approver):\n")
	fmt.Fprintf(&b, "  AGENTPLANE_TOKEN=%s agentplane approvals approve WORKFLOW_ID\n\n", approverToken)
	if s.Model != "" {
		label := "model " + s.Model
		if s.Model == ModelName {
			label = "the " + ModelLabel
		}
		fmt.Fprintf(&b, "  # 6. an LLM agent (%s): each completion streams in with its tokens\n", label)
		fmt.Fprintf(&b, "  agentplane invoke %s --goal \"Is tx_1003 risky?\" --stream\n", Assistant)
		fmt.Fprintf(&b, "  agentplane workflows get WORKFLOW_ID --conversation   # what the model was asked and answered\n")
		fmt.Fprintf(&b, "  agentplane usage --group-by model                      # tokens and cost\n\n")
		fmt.Fprintf(&b, "  # 7. what-if: version 2's instructions open fraud cases. Replay version 1's history with\n")
		fmt.Fprintf(&b, "  #    version 2's model live and every tool answer from the record (no write is ever sent)\n")
		fmt.Fprintf(&b, "  agentplane replay --batch --target %s@2 --agent %s --llm live \\\n", Assistant, Assistant)
		fmt.Fprintf(&b, "    --check outcome_unchanged --gate outcome_unchanged=1\n\n")
	}
	if len(s.Coded) > 0 {
		fmt.Fprintf(&b, "  # 8. an agent written in code (Go, openai-go and the MCP Go SDK) that the demo runs as an\n")
		fmt.Fprintf(&b, "  #    external agent: its completions and calls go through agentplane's run gateway\n")
		fmt.Fprintf(&b, "  #    (docs/external-agents.md: point your own framework's agent at it the same way)\n")
		fmt.Fprintf(&b, "  agentplane invoke %s --goal \"Is tx_1003 risky?\" --stream\n", Coded)
		fmt.Fprintf(&b, "  agentplane workflows get WORKFLOW_ID --conversation\n")
		fmt.Fprintf(&b, "  agentplane replay --batch --target %s@2 --agent %s --llm live \\\n", Coded, Coded)
		fmt.Fprintf(&b, "    --check outcome_unchanged --gate outcome_unchanged=1\n\n")
	}
	io.WriteString(w, b.String()) //nolint:errcheck // stdout
}

// Versions are the agent versions Seed deploys, as POST /v1/agents bodies:
// fraud-triage 1 and 2, then payments-assistant 1 and 2 on model.
func Versions(model string) []map[string]any {
	return []map[string]any{agent("1", 1000, 5000, 0), agent("2", 5000, 1000, 500),
		assistant("1", model, assistantInstructions), assistant("2", model, assistantInstructions+" "+CaseInstruction)}
}
