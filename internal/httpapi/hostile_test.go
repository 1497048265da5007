package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/a2a"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/console/consoletest"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/ratelimit"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/webhook"
)

// hostile is one request meant to hurt the server, and the problem it
// must get instead.
type hostile struct {
	name         string
	method, path string
	token        string
	body         any
	headers      []string
	status       int
	code         problem.Code // "" when net/http answers itself (431)
	// on is the server the request goes to, when not the main one.
	on *harness
}

// manyAnonymous lets the harness answer thousands of requests without a
// valid token from one address.
func manyAnonymous(cfg *httpapi.Config, _ *httpapi.Deps) {
	cfg.RateLimits.IP = ratelimit.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}
}

// strictNetwork makes the harness fetch documents as a server without
// --allow-private-networks does.
func strictNetwork(_ *httpapi.Config, d *httpapi.Deps) {
	client := outbound.New(outbound.Options{})
	d.Tools.Fetcher = client
	d.Models.Addresses = client
	d.Webhooks = &webhook.Service{Store: d.Webhooks.Store, Versions: d.Webhooks.Versions, Now: time.Now, CheckHost: client.CheckHost}
}

// TestHostileInput sends every kind of hostile input the API may meet:
// broken tokens on every endpoint, other tenants' ids, bodies and headers
// past their limits, documents built to exhaust the importers, addresses
// that reach inside the network, expressions and definitions that would
// run or grow without bound, secret references outside the allow-list.
// Each gets its documented 4xx problem; the server stays up and its heap
// stays bounded. It runs alone (not in parallel), so the heap it measures
// is not the other tests'.
func TestHostileInput(t *testing.T) {
	h := newHarness(t, manyAnonymous)
	w := newFraudWorld(t, h)
	strict := newHarness(t, strictNetwork)
	strictTok := strict.token("acme", "tools:write models:write webhooks:write")
	tok := h.token("acme", adminScopes+" workflows:replay audit:read mcp:use")
	wf := w.invoke(t, tok, map[string]any{"goal": "triage", "context": map[string]any{"transaction_id": "tx-1"}})
	wfID := wf["workflow_id"].(string)
	var rp replayResult
	h.do("POST", "/v1/workflows/"+wfID+"/replay", tok, map[string]any{"target_agent_version": "fraud-triage@1"}).json(t, &rp)
	var batch batchResult
	h.do("POST", "/v1/replay-batches", tok, map[string]any{"target_agent_version": "fraud-triage@1", "workflow_ids": []string{wfID}}).json(t, &batch)
	var toolID string
	{
		var tools struct {
			Tools []struct {
				ID string `json:"id"`
			} `json:"tools"`
		}
		h.do("GET", "/v1/tools", tok, nil).json(t, &tools)
		toolID = tools.Tools[0].ID
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var cases []hostile
	add := func(c ...hostile) { cases = append(cases, c...) }

	// Broken tokens, on every endpoint that needs one.
	for name, bad := range badTokens(t, h) {
		for _, ep := range securedEndpoints(t) {
			add(hostile{name: name + " " + ep[0] + " " + ep[1], method: ep[0], path: ep[1], token: bad, status: 401, code: problem.Unauthenticated})
		}
	}

	// Broken tokens on the run gateway: 401 in the provider's shape.
	for name, bad := range badTokens(t, h) {
		for _, ep := range gatewayEndpoints(t) {
			add(hostile{name: name + " " + ep[0] + " " + ep[1], method: ep[0], path: ep[1], token: bad, status: 401})
		}
	}

	// Another tenant's ids: not found, never forbidden.
	other := h.token("globex", adminScopes+" workflows:replay audit:read")
	for _, p := range [][2]string{
		{"GET", "/v1/tools/" + toolID}, {"GET", "/v1/tools/" + toolID + "/operations"}, {"PUT", "/v1/tools/" + toolID},
		{"DELETE", "/v1/tools/" + toolID}, {"GET", "/v1/agents/fraud-triage"}, {"GET", "/v1/agents/fraud-triage/versions"},
		{"PUT", "/v1/agents/fraud-triage/default"}, {"POST", "/v1/agents/fraud-triage/invoke"},
		{"GET", "/v1/workflows/" + wfID}, {"GET", "/v1/workflows/" + wfID + "/events"}, {"POST", "/v1/workflows/" + wfID + "/cancel"},
		{"POST", "/v1/workflows/" + wfID + "/replay"}, {"GET", "/v1/replays/" + rp.ReplayID},
		{"GET", "/v1/replay-batches/" + batch.ID}, {"GET", "/v1/replay-batches/" + batch.ID + "/replays"},
		{"GET", "/v1/replay-batches/" + batch.ID + "/events"}, {"POST", "/v1/replay-batches/" + batch.ID + "/cancel"},
		{"PUT", "/v1/agents/fraud-triage/rollout"}, {"GET", "/v1/agents/fraud-triage/rollout"}, {"DELETE", "/v1/agents/fraud-triage/rollout"},
		{"POST", "/v1/tools/" + toolID + "/refresh"}, {"GET", "/v1/tools/" + toolID + "/revisions"},
		{"GET", "/v1/tools/" + toolID + "/revisions/1/impact"},
	} {
		var body any
		switch {
		case strings.HasSuffix(p[1], "/invoke"):
			body = map[string]any{"goal": "g", "context": map[string]any{"transaction_id": "tx-1"}}
		case strings.HasSuffix(p[1], "/replay"):
			body = map[string]any{"target_agent_version": "fraud-triage@1"}
		case strings.HasSuffix(p[1], "/default"):
			body = map[string]any{"version": "1"}
		case strings.HasSuffix(p[1], "/rollout") && p[0] == "PUT":
			body = map[string]any{"target": "1", "percent": 10}
		case p[0] == "PUT":
			body = map[string]any{"spec": minimalOpenAPI}
		}
		add(hostile{name: "other tenant " + p[0] + " " + p[1], method: p[0], path: p[1], token: other, body: body, status: 404, code: problem.NotFound})
	}

	// Bodies and headers past their limits, and bytes that are not JSON text.
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	// Each endpoint's body, with %s where a string goes.
	for p, shape := range map[string]string{
		"/v1/tools":                      `{"name": "n", "type": "openapi", "spec": "%s"}`,
		"/v1/agents":                     `{"name": "%s", "definition": {"tools": [], "steps": [], "outcome": "'x'"}}`,
		"/v1/agents/fraud-triage/invoke": `{"goal": "%s", "context": {"transaction_id": "tx-1"}}`,
		"/v1/replay-batches":             `{"target_agent_version": "fraud-triage@1", "workflow_ids": ["%s"]}`,
		"/v1/audit/query":                `{"action": "%s"}`,
		"/mcp":                           `{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search_operations", "arguments": {"query": "%s"}}}`,
	} {
		add(
			hostile{name: "2 MiB body " + p, method: "POST", path: p, token: tok, body: fmt.Sprintf(shape, strings.Repeat("a", 2<<20)), status: 413, code: problem.PayloadTooLarge},
			hostile{name: "100,000-deep JSON " + p, method: "POST", path: p, token: tok, body: deep, status: 400, code: problem.MalformedRequest},
			hostile{name: "raw NUL " + p, method: "POST", path: p, token: tok, body: fmt.Sprintf(shape, "a\x00b"), status: 400, code: problem.MalformedRequest},
			hostile{name: "escaped NUL " + p, method: "POST", path: p, token: tok, body: fmt.Sprintf(shape, `a\u0000b`), status: 400, code: problem.MalformedRequest},
			hostile{name: "invalid UTF-8 " + p, method: "POST", path: p, token: tok, body: fmt.Sprintf(shape, "a\xff\xfeb"), status: 400, code: problem.MalformedRequest},
		)
	}
	add(
		hostile{name: "10 MB goal", method: "POST", path: "/v1/agents/fraud-triage/invoke", token: tok,
			body: map[string]any{"goal": strings.Repeat("g", 10<<20)}, status: 413, code: problem.PayloadTooLarge},
		hostile{name: "goal past 8,000 characters", method: "POST", path: "/v1/agents/fraud-triage/invoke", token: tok,
			body: map[string]any{"goal": strings.Repeat("g", 8001), "context": map[string]any{"transaction_id": "tx-1"}}, status: 422, code: problem.ValidationFailed},
		hostile{name: "2 MB header", method: "GET", path: "/v1/tools", token: tok, headers: []string{"X-Big", strings.Repeat("h", 2<<20)}, status: 431},
		hostile{name: "1 MiB header", method: "GET", path: "/v1/tools", token: tok, headers: []string{"X-Big", strings.Repeat("h", 1<<20)}, status: 431},
		hostile{name: "100 KiB header", method: "GET", path: "/v1/tools", token: tok, headers: []string{"X-Big", strings.Repeat("h", 100<<10)},
			status: 431, code: problem.HeadersTooLarge},
		hostile{name: "100 KiB of small headers", method: "GET", path: "/v1/tools", token: tok, headers: smallHeaders(2000, 50),
			status: 431, code: problem.HeadersTooLarge},
		hostile{name: "100 KiB path", method: "GET", path: "/v1/tools/" + strings.Repeat("p", 100<<10), token: tok,
			status: 431, code: problem.HeadersTooLarge},
	)

	// Documents built to exhaust an importer.
	register := func(name, typ string, fields map[string]any, status int, code problem.Code) {
		body := map[string]any{"name": strings.ToLower(strings.ReplaceAll(name, " ", "-")), "type": typ}
		for k, v := range fields {
			body[k] = v
		}
		add(hostile{name: name, method: "POST", path: "/v1/tools", token: tok, body: body, status: status, code: code})
	}
	register("yaml alias bomb", "openapi", map[string]any{"spec": yamlBomb}, 422, problem.SpecInvalid)
	register("wsdl entity expansion", "soap", map[string]any{"spec": xmlBomb}, 422, problem.SpecInvalid)
	register("wsdl external entity", "soap", map[string]any{"spec": xmlExternal}, 422, problem.SpecInvalid)
	register("graphql 10000 deep", "graphql", map[string]any{"spec": "type Query { f(a: " + strings.Repeat("[", 10000) + "Int" + strings.Repeat("]", 10000) + "): Int }"}, 422, problem.SpecInvalid)
	register("openapi schema 10000 deep", "openapi", map[string]any{"spec": deepSchema(10000)}, 422, problem.SpecInvalid)

	// Addresses inside the network, however written.
	for _, u := range []string{"http://127.0.0.1/openapi.json", "http://[::1]/openapi.json", "http://169.254.169.254/latest/meta-data",
		"http://[2002:a9fe:a9fe::]/openapi.json", "http://[::127.0.0.1]/openapi.json", "http://[64:ff9b:1::7f00:1]/openapi.json",
		"http://0.0.0.0/openapi.json", "http://2130706433/openapi.json", "http://0177.0.0.1/openapi.json", "http://0x7f.0.0.1/openapi.json",
		"http://127.1/openapi.json", "http://localhost/openapi.json", "http://[::ffff:127.0.0.1]/openapi.json",
		"http://[64:ff9b::7f00:1]/openapi.json", "http://10.0.0.1/openapi.json", "http://metadata.google.internal/computeMetadata/v1/",
		"file:///etc/passwd"} {
		add(hostile{name: "ssrf " + u, method: "POST", path: "/v1/tools", token: strictTok, on: strict,
			body: map[string]any{"name": "ssrf", "type": "openapi", "spec_url": u}, status: 422, code: problem.URLNotAllowed})
	}
	add(hostile{name: "ssrf a2a card", method: "POST", path: "/v1/tools", token: strictTok, on: strict,
		body: map[string]any{"name": "ssrf", "type": "a2a", "spec_url": "http://169.254.169.254/.well-known/agent-card.json"}, status: 422, code: problem.URLNotAllowed})
	// Schemes other than http(s), wherever a URL is registered.
	for _, u := range []string{"gopher://127.0.0.1:6379/_INFO", "file:///etc/passwd", "ftp://ftp.example.com/x", "dict://127.0.0.1:11211/"} {
		add(hostile{name: "ssrf scheme spec_url " + u, method: "POST", path: "/v1/tools", token: strictTok, on: strict,
			body: map[string]any{"name": "ssrf", "type": "mcp", "spec_url": u}, status: 422, code: problem.URLNotAllowed},
			hostile{name: "ssrf scheme endpoint_url " + u, method: "POST", path: "/v1/tools", token: strictTok, on: strict,
				body: map[string]any{"name": "ssrf", "type": "openapi", "spec": minimalOpenAPI, "endpoint_url": u}, status: 422, code: problem.URLNotAllowed},
			hostile{name: "ssrf scheme token_url " + u, method: "POST", path: "/v1/tools", token: strictTok, on: strict,
				body: map[string]any{"name": "ssrf", "type": "openapi", "spec": minimalOpenAPI,
					"auth": map[string]any{"type": "oauth2", "secrets_ref": "env://TOOL_X", "token_url": u}}, status: 422, code: problem.URLNotAllowed},
			hostile{name: "ssrf scheme model " + u, method: "POST", path: "/v1/models", token: strictTok, on: strict,
				body: map[string]any{"name": "ssrf", "provider": "openai", "base_url": u, "model": "m"}, status: 422, code: problem.URLNotAllowed},
			hostile{name: "ssrf scheme webhook " + u, method: "POST", path: "/v1/webhooks", token: strictTok, on: strict,
				body: map[string]any{"url": u, "events": []string{"workflow.completed"}}, status: 422, code: problem.URLNotAllowed})
	}
	// Receivers inside the network, by address or by a name resolving there.
	for _, u := range []string{"https://localhost/hook", "https://127.0.0.1/hook", "https://[2002:7f00:1::]/hook", "https://[::10.0.0.1]/hook",
		"https://[64:ff9b:1::a00:1]/hook", "http://169.254.169.254/latest/meta-data"} {
		add(hostile{name: "ssrf webhook " + u, method: "POST", path: "/v1/webhooks", token: strictTok, on: strict,
			body: map[string]any{"url": u, "events": []string{"workflow.completed"}}, status: 422, code: problem.URLNotAllowed})
	}
	register("secret ref outside the allow-list", "openapi", map[string]any{"spec": minimalOpenAPI,
		"auth": map[string]any{"type": "bearer", "secrets_ref": "env://HOME"}}, 422, problem.SecretRefNotAllowed)
	register("vault path of another tenant", "openapi", map[string]any{"spec": minimalOpenAPI,
		"auth": map[string]any{"type": "bearer", "secrets_ref": "vault://kv/tenants/globex/key"}}, 422, problem.SecretRefNotAllowed)

	// Tool revisions and refreshes given numbers and periods out of any
	// bound (TestHostileRollout has a rollout's).
	for _, since := range []string{"-1h", "0s", "1e9h", "100000d", "-7d", "9999999999999999999d", "91d", "x"} {
		add(hostile{name: "impact since " + since, method: "GET", path: "/v1/tools/" + toolID + "/revisions/1/impact?since=" + url.QueryEscape(since),
			token: tok, status: 422, code: problem.ValidationFailed})
	}
	for _, n := range []string{"0", "-1", "99999999999999999999", "1e3", "x"} {
		add(hostile{name: "impact revision " + n, method: "GET", path: "/v1/tools/" + toolID + "/revisions/" + n + "/impact", token: tok, status: 404, code: problem.NotFound})
	}
	for _, every := range []string{"1e9h", "-24h", "59m", "9999999999999h", "24"} {
		register("refresh "+every, "openapi", map[string]any{"spec_url": "http://127.0.0.1:1/openapi.json", "refresh": every}, 422, problem.ValidationFailed)
	}

	// Definitions that would run or grow without bound.
	deploy := func(name string, def string) {
		add(hostile{name: name, method: "POST", path: "/v1/agents", token: tok,
			body: map[string]any{"name": "hostile", "definition": json.RawMessage(def)}, status: 422, code: problem.ValidationFailed})
	}
	nested := "[1,2,3,4,5,6,7,8,9,10]"
	deploy("CEL of 10^8 iterations", `{"tools": ["payments"], "steps": [{"action": "a", "set": {"v": "`+loopCEL()+`"}}], "outcome": "'done'"}`)
	grow := "'a string of some length'"
	for i := range 8 {
		grow = fmt.Sprintf("%s.map(y%d, %s)", nested, i, grow)
	}
	deploy("CEL list of 10^8 strings", `{"tools": ["payments"], "steps": [{"action": "a", "set": {"v": "`+grow+`.size() > 0"}}], "outcome": "'done'"}`)
	var steps []string
	for i := range 10000 {
		steps = append(steps, fmt.Sprintf(`{"action": "s%d", "set": {"v": "%d"}}`, i, i))
	}
	deploy("10,000 listed steps", `{"tools": ["payments"], "steps": [`+strings.Join(steps, ",")+`], "outcome": "'done'"}`)

	for _, c := range cases {
		target := h
		if c.on != nil {
			target = c.on
		}
		r := target.send(c)
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d: %.300s", c.name, r.Status, c.status, r.Body)
			continue
		}
		if c.code == "" {
			continue
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Errorf("%s: Content-Type %q, want a problem document", c.name, ct)
			continue
		}
		if d := r.problem(t); d.Code != c.code || d.Detail == "" {
			t.Errorf("%s: problem %s %q, want %s with a detail", c.name, d.Code, d.Detail, c.code)
		}
	}

	// Still up, still answering, and not holding what it was sent.
	if r := h.do("GET", "/healthz", "", nil); r.Status != 200 {
		t.Fatalf("healthz after the hostile input: %d", r.Status)
	}
	if r := h.do("GET", "/v1/workflows/"+wfID, tok, nil); r.Status != 200 {
		t.Fatalf("a workflow after the hostile input: %d", r.Status)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 64<<20 {
		t.Errorf("the heap grew by %d MB over %d hostile requests", grown>>20, len(cases))
	}
	t.Logf("%d hostile requests; heap %d MB before, %d MB after", len(cases), before.HeapAlloc>>20, after.HeapAlloc>>20)
}

// TestHostileRollout sends a rollout's fields out of any bound: each gets
// a 4xx naming the field, and no rollout starts.
func TestHostileRollout(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.token("acme", adminScopes)
	deployFinishing(t, h, admin, "triage", "cleared")
	deployFinishing(t, h, admin, "triage", "escalated")
	for _, c := range []struct {
		name, body string
		status     int
		field      string // "" for a body that is not JSON of the request's shape
	}{
		{"percent 1e400", `{"target": "2", "percent": 1e400}`, 400, ""},
		{"percent of 400 digits", `{"target": "2", "percent": 1` + strings.Repeat("0", 400) + `}`, 400, ""},
		{"percent just over 100", `{"target": "2", "percent": 100.0000000001}`, 422, "percent"},
		{"percent -1e-300", `{"target": "2", "percent": -1e-300}`, 422, "percent"},
		{"percent a string", `{"target": "2", "percent": "10"}`, 400, ""},
		{"min_runs -1", `{"target": "2", "percent": 10, "min_runs": -1}`, 422, "min_runs"},
		{"min_runs 1e12", `{"target": "2", "percent": 10, "min_runs": 1000000000000}`, 422, "min_runs"},
		{"min_runs 1e30", `{"target": "2", "percent": 10, "min_runs": 1000000000000000000000000000000}`, 400, ""},
		{"target ../x", `{"target": "../x", "percent": 10}`, 422, "target"},
		{"target triage@../2", `{"target": "triage@../2", "percent": 10}`, 422, "target"},
		{"target @", `{"target": "@", "percent": 10}`, 422, "target"},
		{"target triage@2@2", `{"target": "triage@2@2", "percent": 10}`, 422, "target"},
		{"target of 100,000 bytes", `{"target": "` + strings.Repeat("9", 100_000) + `", "percent": 10}`, 422, "target"},
		{"sticky of 5,000 bytes", `{"target": "2", "percent": 10, "sticky": "` + strings.Repeat("a", 5000) + `"}`, 422, "sticky"},
		{"sticky not CEL", `{"target": "2", "percent": 10, "sticky": "goal +"}`, 422, "sticky"},
		{"sticky of 10^8 iterations", `{"target": "2", "percent": 10, "sticky": "` + loopCEL() + `"}`, 422, "sticky"},
		{"check of 10^8 iterations", `{"target": "2", "percent": 10, "checks": [{"name": "c", "expr": "` + loopCEL() + `"}]}`, 422, "checks[0].expr"},
		{"gate of a check not named", `{"target": "2", "percent": 10, "gate": {"nope": 0.5}}`, 422, "gate.nope"},
		{"mode unknown", `{"target": "2", "percent": 10, "mode": "blue-green"}`, 422, "mode"},
	} {
		r := h.do("PUT", "/v1/agents/triage/rollout", admin, []byte(c.body))
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d: %.300s", c.name, r.Status, c.status, r.Body)
			continue
		}
		p := r.problem(t)
		if c.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != c.field) {
			t.Errorf("%s: errors %+v, want the field %s", c.name, p.Errors, c.field)
		}
	}
	if r := h.do("GET", "/v1/agents/triage/rollout", admin, nil); r.Status != 404 {
		t.Errorf("a rollout after the hostile PUTs: %d %.300s", r.Status, r.Body)
	}
}

// loopCEL is a CEL expression of 10^8 iterations.
func loopCEL() string {
	loop := "true"
	for i := range 8 {
		loop = fmt.Sprintf("[1,2,3,4,5,6,7,8,9,10].exists_one(x%d, %s)", i, loop)
	}
	return loop
}

// smallHeaders is n headers of size bytes each, as name and value pairs.
func smallHeaders(n, size int) []string {
	var hs []string
	for i := range n {
		hs = append(hs, fmt.Sprintf("X-H%d", i), strings.Repeat("v", size))
	}
	return hs
}

// TestHeadersUnderTheLimitAreServed checks that the header limit leaves
// large but ordinary requests alone.
func TestHeadersUnderTheLimitAreServed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:read")
	if r := h.do("GET", "/v1/tools", tok, nil, "X-Big", strings.Repeat("h", 60<<10)); r.Status != 200 {
		t.Fatalf("a 60 KiB header: %d %s", r.Status, r.Body)
	}
}

// TestABodySentBeforeReadingGetsItsAnswer sends whole bodies of 10 MB over
// a raw connection and only then reads, as Python's urllib does: the
// refusal (over the body limit, or without a token) arrives as its problem
// document instead of a reset connection.
func TestABodySentBeforeReadingGetsItsAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", adminScopes)
	body := `{"goal": "` + strings.Repeat("g", 10<<20) + `"}`
	for _, c := range []struct {
		name   string
		token  string
		status int
		code   problem.Code
	}{
		{"over the body limit", tok, 413, problem.PayloadTooLarge},
		{"without a token", "", 401, problem.Unauthenticated},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(h.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			req := "POST /v1/agents/fraud-triage/invoke HTTP/1.1\r\nHost: " + strings.TrimPrefix(h.URL, "http://") +
				"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
			if c.token != "" {
				req += "Authorization: Bearer " + c.token + "\r\n"
			}
			if _, err := io.WriteString(conn, req+"\r\n"+body); err != nil {
				t.Fatalf("writing the whole body: %v", err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the answer's body: %v", err)
			}
			r := response{Status: resp.StatusCode, Header: resp.Header, Body: b}
			if r.Status != c.status || r.problem(t).Code != c.code {
				t.Fatalf("answer %d %s, want %d %s", r.Status, r.Body, c.status, c.code)
			}
		})
	}
}

// send sends a hostile request; a string body is sent as it is.
func (h *harness) send(c hostile) response {
	h.t.Helper()
	var body any
	switch b := c.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	default:
		body = b
	}
	return h.do(c.method, c.path, c.token, body, c.headers...)
}

// securedEndpoints lists every operation of the OpenAPI document that needs
// a token, with its path parameters filled in.
func securedEndpoints(t *testing.T) [][2]string { return endpointsSecured(t, false) }

// gatewayEndpoints are the run gateway's operations, which take a run
// token rather than an access token.
func gatewayEndpoints(t *testing.T) [][2]string { return endpointsSecured(t, true) }

// endpointsSecured lists the document's operations that need an access
// token, or with gateway those that need a run token.
func endpointsSecured(t *testing.T, gateway bool) [][2]string {
	t.Helper()
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Security []map[string][]string `json:"security"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for path, ops := range doc.Paths {
		filled := strings.NewReplacer("{id}", "x_1", "{step}", "1").Replace(path)
		for method, op := range ops {
			if len(op.Security) > 0 && (op.Security[0]["runToken"] == nil) != gateway {
				out = append(out, [2]string{strings.ToUpper(method), filled})
			}
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[1]+a[0], b[1]+b[0]) })
	if len(out) < 25 && !gateway {
		t.Fatalf("only %d secured operations in the OpenAPI document", len(out))
	}
	return out
}

// badTokens are tokens the server must refuse: forged, expired, unsigned,
// and signed with HMAC keyed by the server's own public key.
func badTokens(t *testing.T, h *harness) map[string]string {
	t.Helper()
	good := h.token("acme", adminScopes)
	parts := strings.Split(good, ".")
	sig := []byte(parts[2])
	sig[len(sig)/2] ^= 1
	if sig[len(sig)/2] == '-' || sig[len(sig)/2] == '_' {
		sig[len(sig)/2] = 'A'
	}
	past, err := auth.NewIssuer(context.Background(), h.DB, h.URL, func() time.Time { return time.Now().Add(-3 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	expired, err := past.Mint(context.Background(), auth.MintRequest{Tenant: "acme", Scopes: auth.ParseScopes(adminScopes)})
	if err != nil {
		t.Fatal(err)
	}
	var header map[string]any
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	json.Unmarshal(hb, &header)
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	none := map[string]any{"alg": "none", "typ": header["typ"], "kid": header["kid"]}
	jwks := h.do("GET", "/.well-known/jwks.json", "", nil).Body
	hs := map[string]any{"alg": "HS256", "typ": header["typ"], "kid": header["kid"]}
	mac := hmac.New(sha256.New, bytes.TrimSpace(jwks))
	mac.Write([]byte(enc(hs) + "." + parts[1]))
	return map[string]string{
		"forged signature":               parts[0] + "." + parts[1] + "." + string(sig),
		"expired":                        expired,
		"alg none":                       enc(none) + "." + parts[1] + ".",
		"HS256 keyed by the public JWKS": enc(hs) + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)),
		"not a JWT":                      "Bearer-ish",
	}
}

const minimalOpenAPI = `{"openapi": "3.0.3", "info": {"title": "m", "version": "1"}, "servers": [{"url": "http://127.0.0.1:1"}],
 "paths": {"/x": {"get": {"operationId": "getX", "responses": {"200": {"description": "ok"}}}}}}`

// yamlBomb is an OpenAPI document whose aliases would expand to 10^9 nodes.
var yamlBomb = `openapi: 3.0.3
info: {title: bomb, version: "1"}
x-a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]
x-b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
x-c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
x-d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
x-e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
x-f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
x-g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
x-h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
x-i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]
paths: {}
`

// xmlBomb is a WSDL whose entities would expand to 10^9 characters.
const xmlBomb = `<?xml version="1.0"?>
<!DOCTYPE definitions [
 <!ENTITY a "lollollollollollollollollollol">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
 <!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">
 <!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;">
]>
<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" name="bomb"><documentation>&h;</documentation></definitions>`

// xmlExternal is a WSDL that names a file as an external entity.
const xmlExternal = `<?xml version="1.0"?>
<!DOCTYPE definitions [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" name="x"><documentation>&x;</documentation></definitions>`

// revocable has the harness check bearer tokens, console sessions, sign-in
// links and schedules against one revocation list read with the clock now,
// as serve wires them; sched is set to the harness's scheduler.
func revocable(now func() time.Time, sched **schedule.Scheduler) option {
	return func(_ *httpapi.Config, d *httpapi.Deps) {
		list := auth.NewRevocations(d.Store, auth.DefaultRevocationTTL, now)
		d.Verifier, d.Revocations = list.Verifier(d.Verifier), list
		d.Schedules.Scheduler.Revocations = list
		*sched = d.Schedules.Scheduler
	}
}

// TestHostileRevokedClient: once the operator revokes a client and the
// revocation list is reloaded (its ttl), nothing acts as that client any
// more: a console session opened with its token sends the reader to sign
// in, a sign-in link minted before the revocation is refused, and the
// schedules it created are paused (the reason on the schedule and in the
// audit log) instead of running, by the scheduler or by a trigger.
func TestHostileRevokedClient(t *testing.T) {
	t.Parallel()
	var later atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	var sched *schedule.Scheduler
	h := newHarness(t, revocable(now, &sched))
	admin := h.token("acme", "agents:write agents:invoke schedules:write schedules:read audit:read")
	def := json.RawMessage(`{"tools": [], "steps": [{"action": "a", "set": {"v": "1"}}], "outcome": "'swept'"}`)
	if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": "sweep", "definition": def}); r.Status != 201 {
		t.Fatalf("deploy: %d %s", r.Status, r.Body)
	}
	ctx := t.Context()
	scopes := auth.ParseScopes("workflows:read agents:invoke schedules:write schedules:read")
	clientID, _, err := auth.CreateClient(ctx, h.DB, "acme", "ci", scopes, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.Issuer.Mint(ctx, auth.MintRequest{Tenant: "acme", ClientID: clientID, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	session := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, tok))
	unredeemed := consoletest.Link(t, h.URL, tok)
	r := h.do("POST", "/v1/schedules", tok, map[string]any{"agent": "sweep", "cron": "@every 1h", "goal": "sweep"})
	var sch struct {
		ID           string `json:"id"`
		Paused       bool   `json:"paused"`
		PausedReason string `json:"paused_reason"`
	}
	r.json(t, &sch)
	if r.Status != 201 {
		t.Fatalf("schedule of the client: %d %s", r.Status, r.Body)
	}
	if status, _ := consoletest.Get(t, session, h.URL+"/console/workflows"); status != 200 {
		t.Fatalf("the client's console session before the revocation: %d", status)
	}

	if _, err := auth.RevokeClient(ctx, h.DB, clientID, time.Now(), &audit.Record{Time: time.Now(), Actor: audit.Actor{Sub: "cli"}}); err != nil {
		t.Fatal(err)
	}
	later.Store(int64(auth.DefaultRevocationTTL)) // every copy of the list is now too old

	if r := h.do("GET", "/v1/schedules", tok, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("the revoked client's bearer token: %d, want 401", r.Status)
	}
	if loc, status := redirect(t, session, h.URL+"/console/workflows"); status != http.StatusSeeOther || !strings.Contains(loc, "/console/signin?next=") {
		t.Errorf("the revoked client's console session: %d to %q, want 303 to sign in", status, loc)
	}
	if status, _ := consoletest.Get(t, session, h.URL+"/console/signin"); status != 200 {
		t.Errorf("the sign-in page for the ended session: %d, want the page itself (not a redirect loop)", status)
	}
	if status, body := consoletest.Get(t, consoletest.Client(t), unredeemed); status != http.StatusForbidden || !strings.Contains(body, "revoked") {
		t.Errorf("a link minted before the revocation: %d, want 403 saying the client is revoked:\n%s", status, body)
	}

	if err := sched.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	h.do("GET", "/v1/schedules/"+sch.ID, admin, nil).json(t, &sch)
	if !sch.Paused || !strings.Contains(sch.PausedReason, clientID) || !strings.Contains(sch.PausedReason, "revoked") {
		t.Errorf("the client's schedule after the revocation: paused %v, reason %q; want paused, naming the revoked client", sch.Paused, sch.PausedReason)
	}
	r = h.do("GET", "/v1/audit/query?action=schedule.pause", admin, nil)
	if !strings.Contains(string(r.Body), sch.ID) || !strings.Contains(string(r.Body), "revoked") {
		t.Errorf("audit of the pause: %d %s, want a record naming the schedule and the reason", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/schedules/"+sch.ID+"/resume", admin, nil); r.Status != 200 {
		t.Fatalf("resume: %d %s", r.Status, r.Body)
	}
	if r := h.do("POST", "/v1/schedules/"+sch.ID+"/trigger", admin, nil); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "revoked") {
		t.Errorf("a trigger of the revoked client's schedule: %d %s, want 409 saying why", r.Status, r.Body)
	}
	if r := h.do("GET", "/v1/workflows?agent=sweep", h.token("acme", "workflows:read"), nil); strings.Contains(string(r.Body), "workflow_id") {
		t.Errorf("the revoked client's schedule started a workflow: %s", r.Body)
	}
}

// TestHostileConsoleForm: a console form over its size limit is answered
// with a 413 page, and the session stands.
func TestHostileConsoleForm(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, h.token("acme", "workflows:read")))
	_, page := consoletest.Get(t, c, h.URL+"/console/workflows")
	form := url.Values{"csrf": {between(page, `name="csrf" value="`, `"`)}, "padding": {strings.Repeat("a", 80<<10)}}
	resp, err := c.PostForm(h.URL+"/console/signout", form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "larger than") {
		t.Errorf("an 80 KiB form: %d %s\n%s, want a 413 page", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if status, _ := consoletest.Get(t, c, h.URL+"/console/workflows"); status != 200 {
		t.Errorf("the session after the refused form: %d", status)
	}
}

// TestHostileSignInLinkWhileSignedIn: a link someone else minted, opened
// in a browser signed in as another identity, does not replace the
// session: a page shows both identities and only its form, posted with
// the session's CSRF token, switches.
func TestHostileSignInLinkWhileSignedIn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := consoletest.SignInHTTP(t, consoletest.Link(t, h.URL, h.token("acme", "workflows:read")))
	mallory, err := h.Issuer.Mint(t.Context(), mint("globex", "mallory", "workflows:read"))
	if err != nil {
		t.Fatal(err)
	}
	status, page := consoletest.Get(t, c, consoletest.Link(t, h.URL, mallory))
	if status != 200 || !strings.Contains(page, "alice · tenant acme") || !strings.Contains(page, "mallory · tenant globex") ||
		!strings.Contains(page, `action="/console/signin"`) {
		t.Fatalf("a link for another identity: %d, want a page naming both and asking to confirm:\n%s", status, page)
	}
	if _, who := consoletest.Get(t, c, h.URL+"/console/workflows"); !strings.Contains(who, "alice · acme") {
		t.Fatalf("the session changed before any confirmation:\n%s", who)
	}
	grant, csrf := between(page, `name="grant" value="`, `"`), between(page, `name="csrf" value="`, `"`)
	post := func(csrf string) (int, string) {
		resp, err := c.PostForm(h.URL+"/console/signin", url.Values{"csrf": {csrf}, "grant": {grant}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	if status, _ := post(strings.Repeat("0", 32)); status != http.StatusForbidden {
		t.Errorf("a confirmation without the session's CSRF token: %d, want 403", status)
	}
	if _, who := consoletest.Get(t, c, h.URL+"/console/workflows"); !strings.Contains(who, "alice · acme") {
		t.Fatalf("a forged confirmation switched the session:\n%s", who)
	}
	if status, loc := post(csrf); status != http.StatusSeeOther || loc != "/console" && loc != "/console/" {
		t.Fatalf("the confirmation: %d to %q, want 303 to the console", status, loc)
	}
	if _, who := consoletest.Get(t, c, h.URL+"/console/workflows"); !strings.Contains(who, "mallory · globex") {
		t.Errorf("after confirming, the session is not mallory's:\n%s", who)
	}
}

// deepSchema is an OpenAPI document with a request schema nested depth deep.
func deepSchema(depth int) string {
	s := `{"type": "string"}`
	for range depth {
		s = `{"type": "object", "properties": {"a": ` + s + `}}`
	}
	return `{"openapi": "3.0.3", "info": {"title": "deep", "version": "1"}, "servers": [{"url": "http://127.0.0.1:1"}],
 "paths": {"/x": {"post": {"operationId": "postX", "requestBody": {"content": {"application/json": {"schema": ` + s + `}}},
 "responses": {"200": {"description": "ok"}}}}}}`
}

// TestHostileA2A sends the A2A endpoints what an A2A client should not:
// each gets the protocol's own error (a JSON-RPC error on that binding, a
// problem document carrying the google.rpc.Status on HTTP+JSON), never a
// 500.
func TestHostileA2A(t *testing.T) {
	t.Parallel()
	h := newHarness(t, manyAnonymous)
	w := newFraudWorld(t, h)
	tok := h.token("acme", "agents:invoke tool:*")
	other := h.token("globex", "agents:invoke tool:*")
	rep := h.rpc(t, "fraud-triage", tok, "SendMessage", map[string]any{"message": a2aMessage("h-1", "triage", map[string]any{"transaction_id": "tx-1"})})
	var sent struct {
		Task a2aTaskJSON `json:"task"`
	}
	json.Unmarshal(rep.Result, &sent)
	taskID := sent.Task.ID
	if taskID == "" {
		t.Fatalf("SendMessage: %s %+v", rep.Result, rep.Error)
	}
	// The other tenant has an agent of the same name, and asks for acme's task.
	if r := h.do("POST", "/v1/agents", h.token("globex", adminScopes), map[string]any{"name": "fraud-triage",
		"definition": json.RawMessage(`{"tools": [], "steps": [{"action": "a", "set": {"v": "1"}}], "outcome": "'done'"}`)}); r.Status != 201 {
		t.Fatalf("deploy for globex: %d %s", r.Status, r.Body)
	}
	_ = w

	send := func(params string) string {
		return `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": ` + params + `}`
	}
	msg := func(parts string) string {
		return send(`{"message": {"messageId": "m-x", "role": "ROLE_USER", "parts": ` + parts + `}}`)
	}
	big := strings.Repeat("g", 8001)
	for _, c := range []struct {
		name    string
		token   string
		body    string
		headers []string
		code    int
	}{
		{"not JSON", tok, `{"jsonrpc": "2.0", "id": 1, "method": `, nil, -32700},
		{"raw NUL", tok, msg("[{\"text\": \"a\x00b\"}]"), nil, -32700},
		{"escaped NUL", tok, msg(`[{"text": "a\u0000b"}]`), nil, -32700},
		{"invalid UTF-8", tok, msg("[{\"text\": \"a\xff\xfeb\"}]"), nil, -32700},
		{"100,000-deep JSON", tok, strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), nil, -32700},
		{"an array", tok, `[1, 2]`, nil, -32600},
		{"jsonrpc 1.0", tok, `{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}`, nil, -32600},
		{"id an object", tok, `{"jsonrpc": "2.0", "id": {}, "method": "GetTask", "params": {"id": "x"}}`, nil, -32600},
		{"no method", tok, `{"jsonrpc": "2.0", "id": 1, "params": {}}`, nil, -32600},
		{"unknown method", tok, `{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}`, nil, -32601},
		{"params an array", tok, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": ["x"]}`, nil, -32602},
		{"message a string", tok, send(`{"message": "hello"}`), nil, -32602},
		{"parts an object", tok, msg(`{"text": "hi"}`), nil, -32602},
		{"an unknown member", tok, send(`{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "t"}]}, "extra": 1}`), nil, -32602},
		{"no message", tok, send(`{}`), nil, -32602},
		{"no messageId", tok, send(`{"message": {"role": "ROLE_USER", "parts": [{"text": "t"}]}}`), nil, -32602},
		{"role agent", tok, send(`{"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "t"}]}}`), nil, -32602},
		{"no text part", tok, msg(`[{"data": {"transaction_id": "tx-1"}}]`), nil, -32602},
		{"no parts", tok, msg(`[]`), nil, -32602},
		{"a data part not an object", tok, msg(`[{"text": "t"}, {"data": [1]}]`), nil, -32602},
		{"two data parts", tok, msg(`[{"text": "t"}, {"data": {}}, {"data": {}}]`), nil, -32602},
		{"a file part", tok, msg(`[{"text": "t"}, {"url": "https://example.com/f.pdf"}]`), nil, -32005},
		{"a goal past 8,000 characters", tok, msg(`[{"text": "` + big + `"}, {"data": {"transaction_id": "tx-1"}}]`), nil, -32602},
		{"a 2 MiB part", tok, msg(`[{"text": "` + strings.Repeat("a", 2<<20) + `"}]`), nil, -32602},
		{"A2A-Version 0.3", tok, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "` + taskID + `"}}`, []string{"A2A-Version", "0.3"}, -32009},
		{"A2A-Version 2.0", tok, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "` + taskID + `"}}`, []string{"A2A-Version", "2.0"}, -32009},
		{"another tenant's task", other, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "` + taskID + `"}}`, nil, -32001},
		{"another tenant's task, cancelled", other, `{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "` + taskID + `"}}`, nil, -32001},
		{"another tenant's task, subscribed", other, `{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "` + taskID + `"}}`, nil, -32001},
		{"another tenant's task, continued", other, send(`{"message": {"messageId": "m-o", "role": "ROLE_USER", "taskId": "` + taskID + `", "parts": [{"text": "t"}]}}`), nil, -32001},
		{"a task id of nothing", tok, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "wf_nothing"}}`, nil, -32001},
		{"no task id", tok, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}}`, nil, -32602},
		{"cancel an ended task", tok, `{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "` + taskID + `"}}`, nil, -32002},
		{"subscribe to an ended task", tok, `{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "` + taskID + `"}}`, nil, -32004},
		{"a message to an ended task", tok, send(`{"message": {"messageId": "m-e", "role": "ROLE_USER", "taskId": "` + taskID + `", "parts": [{"text": "t"}]}}`), nil, -32004},
		{"a push config to a file URL", tok, `{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "` + taskID + `", "url": "file:///etc/passwd"}}`, nil, -32602},
		{"a push config with a token not a secret", tok, `{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "` + taskID + `", "url": "https://example.com/hook", "token": "hunter2"}}`, nil, -32602},
		{"a push config with authentication", tok, `{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "` + taskID + `", "url": "https://example.com/hook", "authentication": {"scheme": "Bearer"}}}`, nil, -32602},
		{"a push config of another tenant's task", other, `{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "` + taskID + `", "url": "https://example.com/hook"}}`, nil, -32001},
		{"a push config of nothing", tok, `{"jsonrpc": "2.0", "id": 1, "method": "GetTaskPushNotificationConfig", "params": {"taskId": "` + taskID + `", "id": "whk_nothing"}}`, nil, -32001},
		{"a push config inline", tok, send(`{"message": {"messageId": "m-p", "role": "ROLE_USER", "parts": [{"text": "t"}]}, "configuration": {"taskPushNotificationConfig": {"url": "https://example.com/hook"}}}`), nil, -32004},
		{"a page size of a million", tok, `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 1000000}}`, nil, -32602},
		{"a state not a state", tok, `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": "DONE"}}`, nil, -32602},
		{"a reused message id", tok, send(`{"message": {"messageId": "h-1", "role": "ROLE_USER", "parts": [{"text": "other goal"}]}}`), nil, -32602},
	} {
		r := h.do("POST", "/a2a/fraud-triage", c.token, c.body, c.headers...)
		var got rpcReply
		if r.Status != 200 || json.Unmarshal(r.Body, &got) != nil || got.Error == nil {
			t.Errorf("%s: %d %.300s, want a JSON-RPC error %d", c.name, r.Status, r.Body, c.code)
			continue
		}
		if got.Error.Code != c.code || got.Error.Message == "" {
			t.Errorf("%s: error %d %q, want %d", c.name, got.Error.Code, got.Error.Message, c.code)
		}
	}

	// HTTP+JSON: problem documents that carry the binding's error.
	for _, c := range []struct {
		name, method, path string
		token              string
		body               string
		headers            []string
		status             int
		code               problem.Code
		reason             string
	}{
		{"another tenant's task", "GET", "/a2a/fraud-triage/tasks/" + taskID, other, "", nil, 404, problem.NotFound, "TASK_NOT_FOUND"},
		{"another tenant's task, cancelled", "POST", "/a2a/fraud-triage/tasks/" + taskID + ":cancel", other, "", nil, 404, problem.NotFound, "TASK_NOT_FOUND"},
		{"another agent's task", "GET", "/a2a/nobody/tasks/" + taskID, tok, "", nil, 404, problem.NotFound, "TASK_NOT_FOUND"},
		{"an unknown task verb", "POST", "/a2a/fraud-triage/tasks/" + taskID + ":explode", tok, "", nil, 404, problem.NotFound, "TASK_NOT_FOUND"},
		{"A2A-Version 0.3", "GET", "/a2a/fraud-triage/tasks/" + taskID, tok, "", []string{"A2A-Version", "0.3"}, 400, a2a.VersionNotSupported.Code, "VERSION_NOT_SUPPORTED"},
		{"A2A-Version parameter 9.9", "GET", "/a2a/fraud-triage/tasks/" + taskID + "?A2A-Version=9.9", tok, "", nil, 400, a2a.VersionNotSupported.Code, "VERSION_NOT_SUPPORTED"},
		{"not JSON", "POST", "/a2a/fraud-triage/message:send", tok, `{"message": `, nil, 400, problem.MalformedRequest, ""},
		{"no text part", "POST", "/a2a/fraud-triage/message:send", tok, `{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {}}]}}`, nil, 422, problem.ValidationFailed, ""},
		{"a file part", "POST", "/a2a/fraud-triage/message:stream", tok, `{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "t"}, {"raw": "AAAA"}]}}`, nil, 400, a2a.ContentTypeNotSupported.Code, "CONTENT_TYPE_NOT_SUPPORTED"},
		{"a 2 MiB part", "POST", "/a2a/fraud-triage/message:send", tok, `{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "` + strings.Repeat("a", 2<<20) + `"}]}}`, nil, 413, problem.PayloadTooLarge, ""},
		{"cancel an ended task", "POST", "/a2a/fraud-triage/tasks/" + taskID + ":cancel", tok, "", nil, 400, a2a.TaskNotCancelable.Code, "TASK_NOT_CANCELABLE"},
		{"a page size of zero", "GET", "/a2a/fraud-triage/tasks?pageSize=0", tok, "", nil, 422, problem.ValidationFailed, ""},
		{"a push config to a gopher URL", "POST", "/a2a/fraud-triage/tasks/" + taskID + "/pushNotificationConfigs", tok, `{"url": "gopher://example.com/hook"}`, nil, 422, problem.URLNotAllowed, ""},
		{"a push config of another task", "POST", "/a2a/fraud-triage/tasks/" + taskID + "/pushNotificationConfigs", tok, `{"taskId": "wf_other", "url": "https://example.com/hook"}`, nil, 422, problem.ValidationFailed, ""},
		{"another tenant's push configs", "GET", "/a2a/fraud-triage/tasks/" + taskID + "/pushNotificationConfigs", other, "", nil, 404, problem.NotFound, "TASK_NOT_FOUND"},
		{"the extended card", "GET", "/a2a/fraud-triage/extendedAgentCard", tok, "", nil, 400, a2a.UnsupportedOperation.Code, "UNSUPPORTED_OPERATION"},
		{"an agent of nothing over JSON-RPC", "POST", "/a2a/nobody", tok, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}`, nil, 404, problem.NotFound, ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := h.do(c.method, c.path, c.token, body, c.headers...)
		if r.Status != c.status {
			t.Errorf("%s: %d %.300s, want %d", c.name, r.Status, r.Body, c.status)
			continue
		}
		var doc struct {
			problem.Document
			Error struct {
				Code    int `json:"code"`
				Details []struct {
					Reason string `json:"reason"`
				} `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil || doc.Code != c.code || doc.Detail == "" {
			t.Errorf("%s: %.300s, want a problem %s", c.name, r.Body, c.code)
			continue
		}
		if c.reason != "" && c.path != "/a2a/nobody" && (len(doc.Error.Details) != 1 || doc.Error.Details[0].Reason != c.reason || doc.Error.Code != c.status) {
			t.Errorf("%s: error member %+v, want reason %s", c.name, doc.Error, c.reason)
		}
	}
	if r := h.do("GET", "/a2a/fraud-triage/tasks/"+taskID, tok, nil); r.Status != 200 {
		t.Fatalf("the task after the hostile input: %d", r.Status)
	}
}

// TestHostileAnonymousCardsStayOutOfTenantChains asks for agent cards
// without a token, naming tenants in ?tenant=: whether refused or served
// (a public card), each request's record goes to the _system chain, with
// the tenant it named in its details, and no tenant's chain grows.
func TestHostileAnonymousCardsStayOutOfTenantChains(t *testing.T) {
	t.Parallel()
	h := newHarness(t, manyAnonymous)
	admin := h.token("acme", adminScopes)
	for name, def := range map[string]string{
		"greeter": `{"tools": [], "steps": [{"action": "a", "set": {"v": "1"}}], "outcome": "'done'", "a2a": {"public_card": true}}`,
		"private": `{"tools": [], "steps": [{"action": "a", "set": {"v": "1"}}], "outcome": "'done'"}`,
	} {
		if r := h.do("POST", "/v1/agents", admin, map[string]any{"name": name, "definition": json.RawMessage(def)}); r.Status != 201 {
			t.Fatalf("deploy %s: %d %s", name, r.Status, r.Body)
		}
	}
	chain := func(tenant string) []audit.Record {
		t.Helper()
		var recs []audit.Record
		if _, err := h.DB.ScanAudit(t.Context(), tenant, 0, 1000, func(r audit.Record) error {
			recs = append(recs, r)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return recs
	}
	acmeBefore := len(chain("acme"))

	long := strings.Repeat("t", 300)
	cases := []struct {
		agent, tenant string
		status        int
		// named is the tenant the record's details name ("" for none).
		named string
	}{
		{"private", "acme", 401, "acme"},
		{"greeter", "victim", 401, "victim"},
		{"nobody", "victim", 401, "victim"},
		{"greeter", "", 401, ""},
		{"greeter", long, 401, ""},
		{"greeter", "acme", 200, "acme"},
	}
	for _, c := range cases {
		path := "/a2a/" + c.agent + "/.well-known/agent-card.json"
		if c.tenant != "" {
			path += "?tenant=" + c.tenant
		}
		if r := h.do("GET", path, "", nil); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", path, r.Status, r.Body, c.status)
		}
	}

	if got := chain("victim"); len(got) != 0 {
		t.Errorf("the victim's chain holds %d records: %+v", len(got), got)
	}
	if got := chain("acme"); len(got) != acmeBefore {
		t.Errorf("acme's chain grew by %d records: %+v", len(got)-acmeBefore, got[acmeBefore:])
	}
	var cards []audit.Record
	for _, r := range chain(audit.SystemTenant) {
		if r.Action == "a2a.card" {
			cards = append(cards, r)
		}
	}
	if len(cards) != len(cases) {
		t.Fatalf("%d a2a.card records in _system, want %d: %+v", len(cards), len(cases), cards)
	}
	for i, c := range cases {
		r := cards[i]
		var details struct {
			Tenant string `json:"tenant"`
		}
		if err := json.Unmarshal(r.Details, &details); err != nil {
			t.Fatalf("details %s: %v", r.Details, err)
		}
		if r.Status != c.status || r.Resource.ID != c.agent || details.Tenant != c.named || r.Actor.Sub != "" {
			t.Errorf("record of the card of %s for %.20q: status %d, resource %q, details %s, actor %+v",
				c.agent, c.tenant, r.Status, r.Resource.ID, r.Details, r.Actor)
		}
	}

	// With a token the read is the caller's own, in its own chain.
	if r := h.do("GET", "/a2a/private/.well-known/agent-card.json", h.token("acme", "agents:invoke"), nil); r.Status != 200 {
		t.Fatalf("the card with a token: %d %s", r.Status, r.Body)
	}
	if got := chain("acme"); len(got) != acmeBefore+1 || got[len(got)-1].Action != "a2a.card" {
		t.Errorf("acme's chain after its own card read: %d records (before %d)", len(got), acmeBefore)
	}
}
