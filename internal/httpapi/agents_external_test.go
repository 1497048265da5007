package httpapi_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/outbound/outboundtest"
	"github.com/agentplane/agentplane/internal/problem"
)

// externalBlock is an external version of the agent "triage" using the
// tool pets and the model gpt; edit changes it before it is sent.
func externalBlock(edit func(x map[string]any)) map[string]any {
	x := map[string]any{
		"url":          "https://203.0.113.7/triage",
		"auth":         map[string]any{"type": "bearer", "secrets_ref": "env://TOOL_TRIAGE_TOKEN"},
		"timeout":      "20m",
		"max_attempts": 4,
		"tools":        []any{"pets"},
		"models":       []any{"gpt"},
		"policies":     map[string]any{"standard": map[string]any{"allow": "operation != 'deletePet'"}},
		"approvals": []any{map[string]any{"when": "operation == 'createPet'", "reason": "'a new pet'",
			"approver_scope": "approve:pets", "timeout": "1h"}},
		"inputs":          map[string]any{"type": "object", "properties": map[string]any{"ticket": map[string]any{"type": "integer"}}},
		"limits":          map[string]any{"max_tool_calls": 20, "max_llm_tokens": 200000},
		"max_concurrency": 8,
	}
	if edit != nil {
		edit(x)
	}
	return x
}

// externalWorld registers the tool pets and the model gpt in acme and
// returns a token that may deploy and read agents.
func externalWorld(t *testing.T, h *harness) string {
	t.Helper()
	tok := h.token("acme", "tools:write models:write agents:write agents:read")
	h.check(t,
		call{name: "tool", method: "POST", path: "/v1/tools", pattern: "POST /v1/tools", token: tok, body: inlineTool(t, "pets"), status: 201},
		call{name: "model", method: "POST", path: "/v1/models", pattern: "POST /v1/models", token: tok, body: azureModel("gpt"), status: 201})
	return tok
}

// TestDeployExternalVersion deploys an external version and reads it back
// through every view of a version, each conforming to the document.
func TestDeployExternalVersion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := externalWorld(t, h)
	sent := externalBlock(nil)
	got := h.check(t,
		call{name: "deploy", method: "POST", path: "/v1/agents", pattern: "POST /v1/agents", token: tok,
			body: map[string]any{"name": "triage", "description": "Triage, in Python", "external": sent}, status: 201},
		call{name: "get version", method: "GET", path: "/v1/agents/triage@1", pattern: "GET /v1/agents/{id}", token: tok, status: 200},
		call{name: "get", method: "GET", path: "/v1/agents/triage", pattern: "GET /v1/agents/{id}", token: tok, status: 200},
		call{name: "versions", method: "GET", path: "/v1/agents/triage/versions", pattern: "GET /v1/agents/{id}/versions", token: tok, status: 200},
	)
	want, err := json.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	var wantBlock any
	_ = json.Unmarshal(want, &wantBlock)
	type view struct {
		Ref        string          `json:"ref"`
		Tools      []string        `json:"tools"`
		Definition json.RawMessage `json:"definition"`
		External   any             `json:"external"`
	}
	var deployed, version view
	var agentDoc struct {
		Default view `json:"default"`
	}
	var list struct {
		Versions []view `json:"versions"`
	}
	got["deploy"].json(t, &deployed)
	got["get version"].json(t, &version)
	got["get"].json(t, &agentDoc)
	got["versions"].json(t, &list)
	if len(list.Versions) != 1 {
		t.Fatalf("versions: %s", got["versions"].Body)
	}
	for name, v := range map[string]view{"deploy": deployed, "get version": version, "get": agentDoc.Default, "versions": list.Versions[0]} {
		if v.Ref != "triage@1" || v.Definition != nil || !cmp.Equal(v.Tools, []string{"pets"}) {
			t.Errorf("%s: ref %q tools %v definition %s; want triage@1, [pets], none", name, v.Ref, v.Tools, v.Definition)
		}
		if diff := cmp.Diff(wantBlock, v.External); diff != "" {
			t.Errorf("%s: external (-sent +shown):\n%s", name, diff)
		}
	}

	// The stored version is the block as the domain reads it.
	v, err := h.DB.AgentVersion(t.Context(), "acme", "triage", "1")
	if err != nil {
		t.Fatal(err)
	}
	if v.External == nil || v.External.URL != "https://203.0.113.7/triage" || v.External.Attempts() != 4 || v.Definition != nil {
		t.Errorf("stored version: %+v", v)
	}
}

// TestDeployExternalVersionRefused: a deployment giving neither or both of
// definition and external, or an external block that breaks a rule, is
// 422 naming the field, through the real handler.
func TestDeployExternalVersionRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := externalWorld(t, h)
	def := map[string]any{"tools": []any{"pets"}, "steps": []any{map[string]any{"action": "done", "finish": "answered"}}}
	tests := []struct {
		name string
		body map[string]any
		// field and a fragment of its message
		field, says string
		code        problem.Code
	}{
		{"neither", map[string]any{"name": "triage"}, "definition", "give exactly one of definition and external", problem.ValidationFailed},
		{"both", map[string]any{"name": "triage", "definition": def, "external": externalBlock(nil)}, "external",
			"give exactly one of definition and external", problem.ValidationFailed},
		{"unknown member", ext(func(x map[string]any) { x["retries"] = 2 }), "external.retries", "unknown field", problem.ValidationFailed},
		{"unknown tool", ext(func(x map[string]any) { x["tools"] = []any{"pets", "ghost"} }), "external.tools[1]", `no tool named "ghost"`, problem.ValidationFailed},
		{"unknown model", ext(func(x map[string]any) { x["models"] = []any{"gpt-9"} }), "external.models[0]", `no model named "gpt-9"`, problem.ValidationFailed},
		{"bad CEL in a policy", ext(func(x map[string]any) {
			x["policies"] = map[string]any{"standard": map[string]any{"allow": "operation =="}}
		}), "external.policies.standard.allow", "Syntax error", problem.ValidationFailed},
		{"bad CEL in approvals[0].when", ext(func(x map[string]any) { x["approvals"] = []any{map[string]any{"when": "args."}} }),
			"external.approvals[0].when", "Syntax error", problem.ValidationFailed},
		{"approval without when", ext(func(x map[string]any) { x["approvals"] = []any{map[string]any{"approver_scope": "approve:pets"}} }),
			"external.approvals[0].when", "is required", problem.ValidationFailed},
		{"no url", ext(func(x map[string]any) { delete(x, "url") }), "external.url", "is required", problem.ValidationFailed},
		{"url with credentials", ext(func(x map[string]any) { x["url"] = "https://bot:pw@203.0.113.7/triage" }), "external.url", "credentials", problem.ValidationFailed},
		{"url of another scheme", ext(func(x map[string]any) { x["url"] = "ftp://203.0.113.7/triage" }), "external.url", "not an http(s) URL", problem.ValidationFailed},
		{"timeout over an hour", ext(func(x map[string]any) { x["timeout"] = "2h" }), "external.timeout", "must be from 1s to 1h0m0s", problem.ValidationFailed},
		{"max_attempts over 10", ext(func(x map[string]any) { x["max_attempts"] = 11 }), "external.max_attempts", "must be from 1 to 10", problem.ValidationFailed},
		{"bearer without secrets_ref", ext(func(x map[string]any) { x["auth"] = map[string]any{"type": "bearer"} }),
			"external.auth.secrets_ref", "is required for auth type bearer", problem.ValidationFailed},
		{"secrets_ref not a reference", ext(func(x map[string]any) { x["auth"] = map[string]any{"type": "bearer", "secrets_ref": "hunter2"} }),
			"external.auth.secrets_ref", "must be env://NAME", problem.ValidationFailed},
		{"secrets_ref not allowed", ext(func(x map[string]any) {
			x["auth"] = map[string]any{"type": "bearer", "secrets_ref": "env://DATABASE_PASSWORD"}
		}),
			"", "external.auth: secrets_ref env://DATABASE_PASSWORD is not among the references allowed", problem.SecretRefNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.check(t, call{name: tc.name, method: "POST", path: "/v1/agents", pattern: "POST /v1/agents", token: tok, body: tc.body, status: 422})[tc.name]
			d := r.problem(t)
			if d.Code != tc.code {
				t.Fatalf("code %s, want %s: %s", d.Code, tc.code, r.Body)
			}
			if tc.field == "" {
				if !strings.Contains(d.Detail, tc.says) {
					t.Errorf("detail %q does not say %q", d.Detail, tc.says)
				}
				return
			}
			if len(d.Errors) != 1 || d.Errors[0].Field != tc.field || !strings.Contains(d.Errors[0].Message, tc.says) {
				t.Errorf("errors %+v, want one on %s saying %q", d.Errors, tc.field, tc.says)
			}
		})
	}
	if r := h.do("GET", "/v1/agents/triage", tok, nil); r.Status != 404 {
		t.Errorf("a refused deployment stored an agent: %d %s", r.Status, r.Body)
	}
}

// ext is a deployment of triage with an edited external block.
func ext(edit func(x map[string]any)) map[string]any {
	return map[string]any{"name": "triage", "external": externalBlock(edit)}
}

// TestExternalURLUnderTheSSRFRules: an external version's url is checked
// at deploy as a webhook's receiver is: a host that is or resolves to a
// private address is refused, url-not-allowed, without saying the address,
// unless --allow-private-host names it; plain http only to such a host.
func TestExternalURLUnderTheSSRFRules(t *testing.T) {
	t.Parallel()
	resolver := outboundtest.Names{
		"agent.internal.test": netip.MustParseAddr("10.1.2.3"),
		"agents.example.test": netip.MustParseAddr("203.0.113.9"),
		"localhost":           netip.MustParseAddr("::1"),
	}
	allowed, err := outbound.ParseAllowedHost("agent.internal.test:8000")
	if err != nil {
		t.Fatal(err)
	}
	withRule := func(opts outbound.Options) option {
		return func(_ *httpapi.Config, d *httpapi.Deps) {
			opts.Resolver = resolver
			c := outbound.New(opts)
			d.ExternalChecks.URL = outbound.ReceiverRule{CheckHost: c.CheckHost, HTTPHost: c.IsAllowedHost}.Check
		}
	}
	strict := newHarness(t, withRule(outbound.Options{}))
	host := newHarness(t, withRule(outbound.Options{AllowHosts: []outbound.AllowedHost{allowed}}))
	toks := map[*harness]string{strict: externalWorld(t, strict), host: externalWorld(t, host)}
	tests := []struct {
		name string
		h    *harness
		url  string
		says string // "" when deployed
	}{
		{"name resolving to a private address", strict, "https://agent.internal.test:8000/run", "external.url: agent.internal.test resolves to a private address"},
		{"localhost", strict, "https://localhost/run", "external.url: localhost resolves to a private address"},
		{"loopback address", strict, "https://127.0.0.1/run", "external.url: 127.0.0.1 is a loopback address"},
		{"metadata service", strict, "https://169.254.169.254/run", "external.url: 169.254.169.254 is a link-local address"},
		{"plain http to a public host", strict, "http://agents.example.test/run", "external.url: http is allowed only to a host the server allows with --allow-private-host"},
		{"public host", strict, "https://agents.example.test/run", ""},
		{"allowed host", host, "http://agent.internal.test:8000/run", ""},
		{"another port of the allowed host", host, "https://agent.internal.test:9000/run", "external.url: agent.internal.test resolves to a private address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := toks[tc.h]
			body := ext(func(x map[string]any) { x["url"] = tc.url })
			body["name"] = "triage-" + strings.ReplaceAll(tc.name, " ", "-")
			r := tc.h.do("POST", "/v1/agents", tok, body)
			if tc.says == "" {
				if r.Status != 201 {
					t.Fatalf("status %d, want 201: %s", r.Status, r.Body)
				}
				return
			}
			d := r.problem(t)
			if r.Status != 422 || d.Code != problem.URLNotAllowed || !strings.HasPrefix(d.Detail, tc.says) {
				t.Fatalf("%d %s %q, want 422 url-not-allowed saying %q", r.Status, d.Code, d.Detail, tc.says)
			}
			if strings.Contains(tc.says, "resolves") && (strings.Contains(d.Detail, "10.1.2.3") || strings.Contains(d.Detail, "::1") ||
				!strings.Contains(d.Detail, "--allow-private-host")) {
				t.Errorf("detail %q reveals the address or does not name --allow-private-host", d.Detail)
			}
		})
	}
}

// TestExternalVersionReaders: what reads a version works for an external
// one: its A2A card and MCP agent tool list it like a defined agent, the
// console shows its url and governance and compares it with a defined
// version, and a dry-run replay against it is refused, not failed.
func TestExternalVersionReaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := externalWorld(t, h)
	def := map[string]any{"tools": []any{"pets"}, "steps": []any{map[string]any{"action": "done", "finish": "answered"}}}
	for _, d := range []map[string]any{
		{"name": "triage", "description": "Triage, defined", "definition": def},
		{"name": "triage", "description": "Triage, in Python", "external": externalBlock(nil), "promote": true},
	} {
		if r := h.do("POST", "/v1/agents", tok, d); r.Status != 201 {
			t.Fatalf("deploy: %d %s", r.Status, r.Body)
		}
	}
	user := h.token("acme", "agents:read agents:write agents:invoke workflows:read workflows:replay mcp:use")

	r := h.do("GET", "/a2a/triage/.well-known/agent-card.json", user, nil)
	var card struct {
		Name, Description, Version string
		Skills                     []struct{ ID, Description string }
	}
	r.json(t, &card)
	if r.Status != 200 || card.Name != "triage" || card.Version != "2" || card.Description != "Triage, in Python" ||
		len(card.Skills) != 1 || card.Skills[0].Description != "Triage, in Python" {
		t.Errorf("card: %d %s", r.Status, r.Body)
	}
	if r := h.do("GET", "/a2a/triage/.well-known/agent-card.json?tenant=acme", "", nil); r.Status != 401 {
		t.Errorf("anonymous card of an external version: %d %s; want 401, it is not public", r.Status, r.Body)
	}

	cs := mcpSession(t, h, user)
	var found bool
	for tl, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tl.Name != "agent_triage" {
			continue
		}
		found = true
		schema, _ := json.Marshal(tl.InputSchema)
		var s struct {
			Properties struct {
				Context map[string]any `json:"context"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(schema, &s)
		want := externalBlock(nil)["inputs"]
		if diff := cmp.Diff(want, s.Properties.Context); diff != "" || !strings.HasPrefix(tl.Description, "Triage, in Python.") {
			t.Errorf("agent_triage: %q, context (-inputs +schema):\n%s", tl.Description, diff)
		}
	}
	if !found {
		t.Error("MCP lists no agent_triage")
	}

	wf := h.do("POST", "/v1/agents/triage@1/invoke", user, map[string]any{"goal": "triage"})
	var run struct {
		ID string `json:"workflow_id"`
	}
	wf.json(t, &run)
	if wf.Status != 200 {
		t.Fatalf("invoke the defined version: %d %s", wf.Status, wf.Body)
	}
	rp := h.check(t, call{name: "replay", method: "POST", path: "/v1/workflows/" + run.ID + "/replay", pattern: "POST /v1/workflows/{id}/replay",
		token: user, body: map[string]any{"target_agent_version": "triage@2"}, status: 409})["replay"]
	if d := rp.problem(t); d.Code != problem.Conflict || !strings.Contains(d.Detail, "triage@2 is an external agent version") {
		t.Errorf("dry-run replay against the external version: %s", rp.Body)
	}

	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, user))
	status, page := consoletest.Get(t, c, h.URL+"/console/agents/triage")
	for _, want := range []string{
		`<h2 id="definition-title">Version 2 (default)</h2>`,
		`<p id="external-agent">An external agent: agentplane invokes <code>https://203.0.113.7/triage</code>`,
		"url: https://203.0.113.7/triage", "auth: bearer, secret env://TOOL_TRIAGE_TOKEN", "timeout: 20m", "max_attempts: 4", "max_concurrency: 8",
		"approvals[0]: when operation == &#39;createPet&#39;; reason &#39;a new pet&#39;; by approve:pets, 1h",
		"standard: allow operation != &#39;deletePet&#39;", "may use: gpt", "max_tool_calls: 20", "max_llm_tokens: 200000",
	} {
		if status != 200 || !strings.Contains(page, want) {
			t.Errorf("agent page (%d) lacks %s", status, want)
		}
	}
	if strings.Contains(page, "<h3>Steps</h3>") {
		t.Error("the external version's page shows steps")
	}
	status, page = consoletest.Get(t, c, h.URL+"/console/agents/triage/diff?from=1&to=2")
	for _, want := range []string{
		`<details class="diff-section" open data-section="Endpoint">`,
		`<details class="diff-section" open data-section="Steps">`,
		"<code>url: https://203.0.113.7/triage</code>", "<code>done: finish answered</code>",
	} {
		if status != 200 || !strings.Contains(page, want) {
			t.Errorf("diff page (%d) lacks %s", status, want)
		}
	}
}
