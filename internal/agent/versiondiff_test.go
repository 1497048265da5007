package agent_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/demo"
	"github.com/agentplane/agentplane/internal/problem"
)

// demoVersion is the demo's i-th agent version (demo.Versions) as stored.
func demoVersion(t *testing.T, i int) *agent.Version {
	t.Helper()
	body := demo.Versions("demo")[i]
	def, err := json.Marshal(body["definition"])
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Version{Name: body["name"].(string), Version: body["version"].(string),
		Description: body["description"].(string), Definition: def}
}

// changes lists the rows of the sections that changed, as
// "section: kind: left | right", and the sections that did not.
func changes(d *agent.VersionDiff) (changed []string, same []string) {
	for _, s := range d.Sections {
		if !s.Changed {
			same = append(same, s.Name)
			continue
		}
		for _, r := range s.Rows {
			if r.Kind != agent.RowSame {
				changed = append(changed, fmt.Sprintf("%s: %s: %s | %s", s.Name, r.Kind, r.Left, r.Right))
			}
		}
	}
	return changed, same
}

func TestDiffVersionsOfTheDemo(t *testing.T) {
	approvalReason := "'Refund of ' + string(txn.amount) + ' ' + txn.currency + ' on ' + txn.id + ' (' + txn.merchant + ')'"
	refundWhen := "has(context.refund_requested) && context.refund_requested && queue != 'fraud-review'"
	tests := []struct {
		name     string
		from, to int
		changed  []string
		same     []string
	}{
		{
			name: "fraud-triage 1 to 2: a threshold, a policy and an approval step",
			from: 0, to: 1,
			changed: []string{
				"Steps: added:  | refund_approval: approval by approve:refunds, 24h then deny; when …",
				"Expressions: changed: fraud_score.score: txn.amount > 1000.0 ? (customer.riskScore > 0.5 ? 0.93 : 0.81) : (customer.riskScore > 0.5 ? 0.45 : 0.08)" +
					" | fraud_score.score: txn.amount > 5000.0 ? (customer.riskScore > 0.5 ? 0.93 : 0.81) : (customer.riskScore > 0.5 ? 0.45 : 0.08)",
				"Expressions: added:  | refund_approval.when: " + refundWhen,
				"Expressions: added:  | refund_approval.approve.when: txn.amount > 500.0 && txn.amount <= 1000.0",
				"Expressions: added:  | refund_approval.approve.reason: " + approvalReason,
				"Policies: changed: financial: allow !has(args.amount) || args.amount <= 5000.0 | financial: allow !has(args.amount) || args.amount <= 1000.0",
				"Description: changed: Fraud triage: escalate above 1000, refund at most 5000 | Fraud triage: escalate above 5000, refund at most 1000, approval above 500",
			},
			same: []string{"Endpoint", "Approvals", "Model", "Instructions", "Limits", "Tools", "Inputs"},
		},
		{
			name: "payments-assistant 1 to 2: one more sentence of instructions",
			from: 2, to: 3,
			changed: []string{
				"Instructions: added:  | " + demo.CaseInstruction,
				"Description: changed: Answers the payments team's questions about a transaction (" + "You help the payments team. Look the transaction up, then its customer, and answer in two sentences.)" +
					" | Answers the payments team's questions about a transaction (You help the payments team. Look the transaction up, then its customer, and answer in two sentences. " + demo.CaseInstruction + ")",
			},
			same: []string{"Endpoint", "Steps", "Expressions", "Approvals", "Policies", "Model", "Limits", "Tools", "Inputs"},
		},
		{
			name: "a version against itself",
			from: 1, to: 1,
			same: []string{"Endpoint", "Steps", "Expressions", "Approvals", "Policies", "Model", "Instructions", "Limits", "Tools", "Inputs", "Description"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := agent.DiffVersions(demoVersion(t, tc.from), demoVersion(t, tc.to))
			if err != nil {
				t.Fatal(err)
			}
			changed, same := changes(d)
			if diff := cmp.Diff(tc.changed, changed); diff != "" {
				t.Errorf("changed rows (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.same, same); diff != "" {
				t.Errorf("unchanged sections (-want +got):\n%s", diff)
			}
			if d.Changed() != (len(tc.changed) > 0) {
				t.Errorf("Changed() = %v", d.Changed())
			}
		})
	}
}

// TestDiffVersionsSideBySide checks the rows of one section: line numbers
// on each side, a removal and an addition paired as a change, and the
// longer side's extra lines alone.
func TestDiffVersionsSideBySide(t *testing.T) {
	v1, v2 := demoVersion(t, 0), demoVersion(t, 1)
	d, err := agent.DiffVersions(v1, v2)
	if err != nil {
		t.Fatal(err)
	}
	if d.From != "fraud-triage@1" || d.To != "fraud-triage@2" {
		t.Errorf("From, To = %s, %s", d.From, d.To)
	}
	var steps agent.DiffSection
	for _, s := range d.Sections {
		if s.Name == "Steps" {
			steps = s
		}
	}
	type row struct {
		Kind          string
		LeftN, RightN int
	}
	var got []row
	for _, r := range steps.Rows {
		got = append(got, row{r.Kind, r.LeftN, r.RightN})
	}
	want := []row{{"same", 1, 1}, {"same", 2, 2}, {"same", 3, 3}, {"same", 4, 4}, {"same", 5, 5}, {"added", 0, 6}, {"same", 6, 7}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("step rows (-want +got):\n%s", diff)
	}
	if steps.Rows[0].Left != "fetch_transaction: call payments.getTransaction; saves txn" {
		t.Errorf("first step reads %q", steps.Rows[0].Left)
	}
}

func TestDiffVersionsRefusesABrokenDefinition(t *testing.T) {
	broken := &agent.Version{Name: "x", Version: "1", Definition: json.RawMessage(`{"steps": 3}`)}
	_, err := agent.DiffVersions(demoVersion(t, 0), broken)
	p := problem.As(err)
	if p == nil || p.Code != problem.ValidationFailed || len(p.Errors) == 0 || p.Errors[0].Field[:4] != "x@1 " {
		t.Fatalf("err = %v, want a validation problem naming x@1", err)
	}
}

// externalVersion is an external version of fraud-triage.
func externalVersion(version string, edit func(x *agent.External)) *agent.Version {
	x := &agent.External{
		URL:   "https://agents.example.com/fraud",
		Auth:  &agent.ExternalAuth{Type: agent.ExternalAuthBearer, SecretsRef: "env://FRAUD_TOKEN"},
		Tools: []string{"payments", "customers"}, Models: []string{"gpt"},
		Policies:  map[string]agent.Policy{"financial": {Allow: "!has(args.amount) || args.amount <= 1000.0"}},
		Approvals: []agent.ApprovalRule{{When: "operation == 'refund'", ApproverScope: "approve:refunds", Timeout: "1h"}},
		Limits:    &agent.ExternalLimits{MaxToolCalls: 20},
	}
	if edit != nil {
		edit(x)
	}
	return &agent.Version{Name: "fraud-triage", Version: version, Description: "Fraud triage, in Python", External: x}
}

func TestDiffExternalVersions(t *testing.T) {
	tests := []struct {
		name     string
		from, to *agent.Version
		changed  []string
		same     []string
	}{
		{
			name: "an external version against itself",
			from: externalVersion("3", nil), to: externalVersion("3", nil),
			same: []string{"Endpoint", "Steps", "Expressions", "Approvals", "Policies", "Model", "Instructions", "Limits", "Tools", "Inputs", "Description"},
		},
		{
			name: "url, bounds, an approval and a model",
			from: externalVersion("3", nil),
			to: externalVersion("4", func(x *agent.External) {
				x.URL, x.Timeout, x.MaxAttempts = "https://agents.example.com/fraud/v2", "30m", 5
				x.Approvals = append(x.Approvals, agent.ApprovalRule{When: "args.amount > 500.0", Reason: "'large'", OnTimeout: "approve", AllowSelf: true})
				x.Models = append(x.Models, "default")
			}),
			changed: []string{
				"Endpoint: changed: url: https://agents.example.com/fraud | url: https://agents.example.com/fraud/v2",
				"Endpoint: changed: timeout: 10m0s (default) | timeout: 30m",
				"Endpoint: changed: max_attempts: 3 (default) | max_attempts: 5",
				"Approvals: added:  | approvals[1]: when args.amount > 500.0; reason 'large' then approve, the invoker may decide",
				"Model: added:  | may use: default",
			},
			same: []string{"Steps", "Expressions", "Policies", "Instructions", "Limits", "Tools", "Inputs", "Description"},
		},
		{
			name: "a budget that asks",
			from: externalVersion("3", nil),
			to: externalVersion("4", func(x *agent.External) {
				x.Limits = &agent.ExternalLimits{MaxToolCalls: 20, OnExhausted: agent.OnExhaustedAsk, Ask: &agent.BudgetAsk{Timeout: "2h"}}
			}),
			changed: []string{
				"Limits: added:  | on_exhausted: ask",
				"Limits: added:  | ask: approver_scope approve:budget, timeout 2h, on_timeout deny, allow_self false",
			},
			same: []string{"Endpoint", "Steps", "Expressions", "Approvals", "Policies", "Model", "Instructions", "Tools", "Inputs", "Description"},
		},
		{
			name: "operations narrowed",
			from: externalVersion("3", nil),
			to: externalVersion("4", func(x *agent.External) {
				x.Operations = []string{"payments.getTransaction", "customers"}
			}),
			changed: []string{
				"Tools: added:  | offers: payments.getTransaction",
				"Tools: added:  | offers: customers",
			},
			same: []string{"Endpoint", "Steps", "Expressions", "Approvals", "Policies", "Model", "Instructions", "Limits", "Inputs", "Description"},
		},
		{
			name: "a defined version to an external one",
			from: demoVersion(t, 1), to: externalVersion("3", nil),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := agent.DiffVersions(tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			changed, same := changes(d)
			if tc.changed == nil && tc.same == nil {
				// Defined to external: the steps go, the endpoint and
				// approvals come.
				if !slices.Contains(changed, "Endpoint: added:  | url: https://agents.example.com/fraud") ||
					!slices.Contains(changed, "Approvals: added:  | approvals[0]: when operation == 'refund'; by approve:refunds, 1h") ||
					!slices.ContainsFunc(changed, func(s string) bool { return strings.HasPrefix(s, "Steps: removed: fetch_transaction") }) {
					t.Errorf("changed rows:\n%s", strings.Join(changed, "\n"))
				}
				return
			}
			if diff := cmp.Diff(tc.changed, changed); diff != "" {
				t.Errorf("changed rows (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.same, same); diff != "" {
				t.Errorf("unchanged sections (-want +got):\n%s", diff)
			}
		})
	}
}
