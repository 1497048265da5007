package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/client"
	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/demo"
	"github.com/agentplane/agentplane/internal/workflow"
)

// demoDelay is how long the demo's customer API takes to answer, so a
// streamed invoke visibly shows one step after another.
const demoDelay = 300 * time.Millisecond

// startDemo starts the demo's example APIs and seeds the running server
// at baseURL through its API with a token of the demo tenant, then prints
// the ready block on stdout. The demo's LLM agent uses model, or the demo
// model when model is "". The caller closes the APIs.
func startDemo(ctx context.Context, issuer *auth.Issuer, st session.Store, baseURL, publicURL, model string, stdout io.Writer) (*demo.APIs, error) {
	tok, err := issuer.Mint(ctx, auth.MintRequest{Tenant: demo.Tenant, Subject: "demo", Scopes: demo.Scopes, TTL: 12 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("demo: mint its token: %w", err)
	}
	approver, err := issuer.Mint(ctx, auth.MintRequest{Tenant: demo.Tenant, Subject: "demo-approver", Scopes: demo.ApproverScopes, TTL: 12 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("demo: mint its approver's token: %w", err)
	}
	// The tools' servers and the external agent's versions name these
	// addresses, so they listen where they did on the last start: beside
	// the server, 101 to 105 ports up.
	base := demoPortBase(baseURL)
	apis, err := demo.Start(demoDelay, base)
	if err != nil {
		return nil, err
	}
	if err := apis.StartAgent(base, cmp.Or(model, demo.ModelName)); err != nil {
		apis.Close()
		return nil, err
	}
	fmt.Fprintf(stdout, "agentplane demo: example APIs on %s (payments, OpenAPI), %s (customers, GraphQL), %s (cases, SOAP)\n",
		apis.Payments, apis.Customers, apis.Cases)
	if model == "" {
		fmt.Fprintf(stdout, "agentplane demo: %s on %s\n", demo.ModelLabel, apis.Model)
	}
	cl := &client.Client{BaseURL: baseURL, Token: tok, UserAgent: "agentplane-demo/" + version}
	seeded, err := demo.Seed(ctx, cl, apis, model, stdout)
	if err != nil {
		apis.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	if seeded.Waiting, err = waitingRefund(ctx, cl); err != nil {
		apis.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	seeded.History++ // counted before the refund was invoked
	demo.Ready(stdout, publicURL, tok, approver, seeded)
	if err := demoConsole(ctx, st, publicURL, stdout); err != nil {
		apis.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	return apis, nil
}

// demoPortBase is the port the demo's APIs and agent listen above: the
// server's plus 100 (they take 8181 to 8185 beside :8080), or 0 (any free
// ports) when that cannot be worked out.
func demoPortBase(baseURL string) int {
	u, err := url.Parse(baseURL)
	if err != nil {
		return 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil || port+105 > 65535 {
		return 0
	}
	return port + 100
}

// waitingRefund invokes a refund of tx_1007 and returns once it waits for
// approval, so the ready block can say so. The demo's user invoked it, so a
// second person must decide it: the demo's approver, through the console
// link demoConsole prints.
func waitingRefund(ctx context.Context, cl *client.Client) (string, error) {
	var wf struct {
		ID     string `json:"workflow_id"`
		Status string `json:"status"`
	}
	_, err := cl.JSON(ctx, client.Request{Method: http.MethodPost, Path: "/v1/agents/fraud-triage@2/invoke",
		Header: http.Header{"Prefer": {"respond-async"}},
		Body: map[string]any{"goal": "refund tx_1007: the customer asks for their money back",
			"context": map[string]any{"transaction_id": "tx_1007", "refund_requested": true}}}, &wf)
	if err != nil {
		return "", fmt.Errorf("invoke the waiting refund: %w", err)
	}
	// Its steps before the approval call the demo's APIs, each demoDelay
	// slow: a few seconds at most.
	for deadline := time.Now().Add(30 * time.Second); wf.Status != workflow.Waiting; time.Sleep(50 * time.Millisecond) {
		if wf.Status != "" && wf.Status != workflow.Running || time.Now().After(deadline) {
			return "", fmt.Errorf("the refund of tx_1007 (%s) is %s, not waiting for approval", wf.ID, wf.Status)
		}
		if _, err := cl.JSON(ctx, client.Request{Method: http.MethodGet, Path: "/v1/workflows/" + wf.ID}, &wf); err != nil {
			return "", fmt.Errorf("read the waiting refund: %w", err)
		}
	}
	return wf.ID, nil
}

// demoLinkTTL is how long the demo's console link may be opened: unlike
// agentplane console's 60 seconds, long enough to read the ready block
// first. It still signs in once.
const demoLinkTTL = time.Hour

// demoConsole prints a console link that signs in as the demo's approver
// and opens the approvals page: a person can decide the waiting refund and
// follow its workflow with no command at all.
func demoConsole(ctx context.Context, st session.Store, publicURL string, stdout io.Writer) error {
	now := time.Now()
	link, err := console.MintLink(ctx, st, publicURL, session.Grant{Tenant: demo.Tenant, Subject: "demo-approver",
		Scopes: demo.ApproverScopes, SessionExpiresAt: now.Add(12 * time.Hour), Next: "/console/approvals",
		CreatedAt: now, ExpiresAt: now.Add(demoLinkTTL)})
	if err != nil {
		return fmt.Errorf("console link: %w", err)
	}
	fmt.Fprintf(stdout, "Or, with no command at all, open the web console as the demo's approver (the link\n"+
		"signs in once, within an hour; agentplane console makes new ones):\n\n  %s\n\n"+
		"A refund of tx_1007 waits in Approvals: approve it, then open its workflow and watch it finish.\n\n", link)
	return nil
}
