package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/store/postgres"
)

// The customer a tool API answers with: values a business API hands out
// and a privacy review wants kept nowhere.
const (
	secretEmail = "jane.doe@example.com"
	secretCard  = "4111 1111 1111 1111"
	secretIBAN  = "DE89 3704 0044 0532 0130 00"
	secretTaxID = "TX-99887766"
	secretPhone = "+44 20 7946 0958"
)

// secretForms are the spellings of the secrets that must appear nowhere:
// as sent, without separators, and escaped in a URL.
var secretForms = []string{secretEmail, "jane.doe%40example.com", secretCard, "4111111111111111", secretIBAN,
	"DE89370400440532013000", secretTaxID, secretPhone, "+442079460958", "7946 0958"}

const customersSpec = `{"openapi": "3.0.3", "info": {"title": "customers", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {
  "/customers/{id}": {"get": {"operationId": "getCustomer",
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
    "responses": {"200": {"description": "ok"}}}},
  "/orders": {"get": {"operationId": "findOrders",
    "parameters": [{"name": "email", "in": "query", "required": true, "schema": {"type": "string"}}],
    "responses": {"200": {"description": "ok"}}}},
  "/notes": {"post": {"operationId": "createNote",
    "parameters": [{"name": "X-Customer-Tax", "in": "header", "schema": {"type": "string"}}],
    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}},
    "responses": {"200": {"description": "ok"}}}}}}`

// customersAgent reads the customer, looks up its orders by e-mail (and
// the orders of the address the goal names) and writes a note carrying
// every value; its output repeats some of them.
const customersAgent = `{"tools": ["customers"], "steps": [
  {"action": "fetch", "call": "customers.getCustomer", "args": {"id": "'42'"}, "save_as": "c"},
  {"action": "orders", "call": "customers.findOrders", "args": {"email": "c.email"}},
  {"action": "asker", "call": "customers.findOrders", "args": {"email": "goal"}},
  {"action": "note", "call": "customers.createNote", "args": {"X-Customer-Tax": "c.tax_id", "email": "c.email",
    "card": "c.card", "iban": "c.iban", "text": "'call ' + c.phone"}}
 ], "output": "{'email': c.email, 'tax': c.tax_id, 'card': c.card}", "outcome": "'noted'"}`

// customersAPI serves the customer and echoes what it is sent; it keeps
// what reached it, to show that the live calls carried the real values.
type customersAPI struct {
	srv      *httptest.Server
	mu       sync.Mutex
	received []string
}

func newCustomersAPI(t *testing.T) *customersAPI {
	a := &customersAPI{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/openapi.json":
			fmt.Fprintf(w, customersSpec, "http://"+r.Host)
			return
		case strings.HasPrefix(r.URL.Path, "/customers/"):
			json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/customers/"),
				"email": secretEmail, "card": secretCard, "iban": secretIBAN, "tax_id": secretTaxID, "phone": secretPhone})
		case r.URL.Path == "/orders":
			json.NewEncoder(w).Encode(map[string]any{"orders": []any{map[string]any{"id": "ord-1", "email": r.URL.Query().Get("email")}}})
		case r.URL.Path == "/notes":
			body, _ := io.ReadAll(r.Body)
			a.mu.Lock()
			a.received = append(a.received, r.Header.Get("X-Customer-Tax")+" "+string(body))
			a.mu.Unlock()
			fmt.Fprintf(w, `{"received": %s}`, body)
			return
		}
		a.mu.Lock()
		a.received = append(a.received, r.URL.String())
		a.mu.Unlock()
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// collector is a receiver of webhook deliveries or OTLP exports keeping
// every body.
type collector struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				w.WriteHeader(400)
				return
			}
			rd = gz
		}
		b, _ := io.ReadAll(rd)
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) all() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.bodies, []byte("\n"))
}

// leaks returns the secret spellings found in b.
func leaks(b []byte) []string {
	var found []string
	for _, s := range secretForms {
		if bytes.Contains(b, []byte(s)) {
			found = append(found, s)
		}
	}
	return found
}

// redactedRun registers the customers tool with a redaction, runs the
// agent through it and checks what the API, the caller and a webhook saw;
// it returns the workflow's id once the webhook and the spans are in.
func redactedRun(t *testing.T, srv *child, tok string, api *customersAPI, hooks, spans *collector) string {
	t.Helper()
	if code, body := srv.do("POST", "/v1/tools", tok, map[string]any{"name": "customers", "type": "openapi",
		"spec_url": api.srv.URL + "/openapi.json", "side_effects": []string{"create"},
		"redact": map[string]any{"fields": []string{"/response/body/tax_id", "/arguments/X-Customer-Tax"},
			"headers": []string{"x-customer-tax"}, "detect": []string{"phone"}}}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := srv.do("POST", "/v1/webhooks", tok, map[string]any{"url": hooks.srv.URL, "events": []string{"workflow.completed"}}); code != 201 {
		t.Fatalf("webhook: %d %v", code, body)
	}
	if code, body := srv.do("POST", "/v1/agents", tok, map[string]any{"name": "notes", "definition": json.RawMessage(customersAgent)}); code != 201 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	code, wf := srv.do("POST", "/v1/agents/notes/invoke", tok, map[string]any{"goal": "ops@example.org"})
	if code != 200 || wf["status"] != "completed" {
		t.Fatalf("invoke: %d %v", code, wf)
	}
	id := wf["workflow_id"].(string)

	// The live calls carried the real values.
	api.mu.Lock()
	sent := strings.Join(api.received, "\n")
	api.mu.Unlock()
	for _, v := range []string{secretEmail, secretCard, secretIBAN, secretTaxID, "call " + secretPhone} {
		if !strings.Contains(sent, v) {
			t.Errorf("the API was not sent %q; it received:\n%s", v, sent)
		}
	}
	// The history holds the masked forms, equal values equal.
	code, steps := srv.do("GET", "/v1/workflows/"+id, tok, nil)
	raw, _ := json.Marshal(steps)
	if code != 200 || len(leaks(raw)) > 0 || !bytes.Contains(raw, []byte("[redacted:email:")) ||
		!bytes.Contains(raw, []byte("[redacted:field:")) || !bytes.Contains(raw, []byte("[redacted:iban:")) ||
		!bytes.Contains(raw, []byte("[redacted:payment_card:")) || !bytes.Contains(raw, []byte("call [redacted:phone:")) {
		t.Errorf("steps: %d, leaks %v:\n%s", code, leaks(raw), raw)
	}
	if out, _ := json.Marshal(wf["output"]); len(leaks(out)) > 0 || !bytes.Contains(out, []byte("[redacted:")) {
		t.Errorf("output %s: leaks %v", out, leaks(out))
	}
	eventually(t, "a webhook delivery", func() bool { return bytes.Contains(hooks.all(), []byte(id)) })
	eventually(t, "the spans of the calls", func() bool { return bytes.Contains(spans.all(), []byte("customers.createNote")) })
	return id
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 20 s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exportSpans has the servers started next export their spans to c.
func exportSpans(t *testing.T, c *collector) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", c.srv.URL+"/v1/traces")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
}

// checkReplay replays the workflow on its own version, dry: every call is
// served from the record, whose answers are the masked ones.
func checkReplay(t *testing.T, srv *child, tok, id string) {
	t.Helper()
	code, rp := srv.do("POST", "/v1/workflows/"+id+"/replay", tok, map[string]any{"target_agent_version": "notes@1"})
	raw, _ := json.Marshal(rp)
	if code != 201 || rp["replay_outcome"] != "noted" {
		t.Fatalf("replay: %d %s", code, raw)
	}
	delta, _ := json.Marshal(rp["delta"])
	if want := `{"steps_added":0,"steps_changed":0,"steps_removed":0,"tool_calls_changed":0}`; string(delta) != want {
		t.Errorf("replay delta %s, want %s:\n%s", delta, want, raw)
	}
	if len(leaks(raw)) > 0 || !bytes.Contains(raw, []byte("[redacted:iban:")) {
		t.Errorf("replay serves %v, want the masked answers:\n%s", leaks(raw), raw)
	}
}

// checkNoLeaks fails t for each place holding a secret.
func checkNoLeaks(t *testing.T, places map[string][]byte) {
	t.Helper()
	for name, b := range places {
		if len(b) == 0 {
			t.Errorf("%s: nothing to search", name)
		}
		if l := leaks(b); len(l) > 0 {
			t.Errorf("%s holds %q", name, l)
		}
	}
}

// TestRedactedValuesAreKeptNowhereSQLite runs a workflow through a tool
// API that hands out an e-mail address, a card number, an IBAN, a tax id
// and a phone number, and searches the raw SQLite files (the -wal too),
// the server's logs, the exported spans and the webhook bodies for them.
func TestRedactedValuesAreKeptNowhereSQLite(t *testing.T) {
	api, hooks, spans := newCustomersAPI(t), newCollector(t), newCollector(t)
	exportSpans(t, spans)
	data, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-networks", "--log-level", "debug",
		"--redact-detect", "email,payment_card,iban,ip_address")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--sub", "alice",
		"--scope", "tools:write agents:write agents:invoke workflows:read workflows:replay webhooks:write audit:read tool:*"},
		func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	id := redactedRun(t, srv, tok, api, hooks, spans)
	checkReplay(t, srv, tok, id)
	code, audit := srv.do("GET", "/v1/audit/query?limit=500", tok, nil)
	auditRaw, _ := json.Marshal(audit)
	if code != 200 || !bytes.Contains(auditRaw, []byte("tool.call")) {
		t.Fatalf("audit query: %d %s", code, auditRaw)
	}
	srv.kill()
	var files []byte
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files = append(files, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(files, []byte("[redacted:iban:")) {
		t.Error("the SQLite files hold no masked IBAN: the search looked in the wrong place")
	}
	checkNoLeaks(t, map[string][]byte{"the SQLite files": files, "the logs": []byte(srv.output()),
		"the spans": spans.all(), "the webhook bodies": hooks.all(), "the audit records": auditRaw})
}

// TestRedactedValuesAreKeptNowherePostgres is the same on PostgreSQL,
// searching a pg_dump of the database.
func TestRedactedValuesAreKeptNowherePostgres(t *testing.T) {
	if os.Getenv(postgres.TestDatabaseEnv) == "" {
		t.Skip(postgres.TestDatabaseEnv + " not set: skipping the PostgreSQL redaction test " +
			"(set it to e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	api, hooks, spans := newCustomersAPI(t), newCollector(t), newCollector(t)
	exportSpans(t, spans)
	dbURL := postgres.NewTestDatabase(t)
	srv := startChild(t, freeAddr(t), "--data", t.TempDir(), "--database-url", dbURL, "--public-url", "http://agentplane.test",
		"--allow-private-networks", "--log-level", "debug", "--redact-detect", "email,payment_card,iban,ip_address")
	tok := pgToken(t, dbURL, "alice", "tools:write agents:write agents:invoke workflows:read workflows:replay webhooks:write tool:*")
	id := redactedRun(t, srv, tok, api, hooks, spans)
	checkReplay(t, srv, tok, id)
	srv.kill()
	dump := dumpPostgres(t, dbURL)
	if !bytes.Contains(dump, []byte("[redacted:iban:")) || !bytes.Contains(dump, []byte(id)) {
		t.Error("the dump holds no masked IBAN or no workflow: the search looked in the wrong place")
	}
	checkNoLeaks(t, map[string][]byte{"the PostgreSQL dump": dump, "the logs": []byte(srv.output()),
		"the spans": spans.all(), "the webhook bodies": hooks.all()})
}

// dumpPostgres is the database as pg_dump writes it, or, without
// pg_dump, every row of every table as text.
func dumpPostgres(t *testing.T, dbURL string) []byte {
	t.Helper()
	if path, err := exec.LookPath("pg_dump"); err == nil {
		out, err := exec.Command(path, "--data-only", dbURL).Output()
		if err != nil {
			t.Fatalf("pg_dump: %v", err)
		}
		return out
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, table := range tables {
		rows, err := conn.Query(ctx, `SELECT t::text FROM `+table+` t`)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(strings.Join(texts, "\n"))
	}
	return out.Bytes()
}
