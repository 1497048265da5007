package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/client"
	"github.com/agentplane/agentplane/internal/demo"
)

// demoDelay is how long the demo's customer API takes to answer, so a
// streamed invoke visibly shows one step after another.
const demoDelay = 300 * time.Millisecond

// startDemo starts the demo's example APIs and seeds the running server
// at baseURL through its API with a token of the demo tenant, then prints
// the ready block on stdout. The demo's LLM agent uses model, or the demo
// model when model is "". The caller closes the APIs.
func startDemo(ctx context.Context, issuer *auth.Issuer, baseURL, publicURL, model string, stdout io.Writer) (*demo.APIs, error) {
	tok, err := issuer.Mint(ctx, auth.MintRequest{Tenant: demo.Tenant, Subject: "demo", Scopes: demo.Scopes, TTL: 12 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("demo: mint its token: %w", err)
	}
	approver, err := issuer.Mint(ctx, auth.MintRequest{Tenant: demo.Tenant, Subject: "demo-approver", Scopes: demo.ApproverScopes, TTL: 12 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("demo: mint its approver's token: %w", err)
	}
	apis, err := demo.Start(demoDelay)
	if err != nil {
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
	demo.Ready(stdout, publicURL, tok, approver, seeded)
	return apis, nil
}
