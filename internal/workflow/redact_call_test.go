package workflow_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// TestShortMaskedArgumentsAreMaskedWhereTheCallPutThem calls an OpenAPI
// tool of a real server with three-character values its redaction names,
// one in the path, the query, a header and the body (and one nested in a
// body member), its base URL holding a user name and password: the API
// receives the real values; the stored step's request holds none of them,
// nor the password, only the tokens its args show.
func TestShortMaskedArgumentsAreMaskedWhereTheCallPutThem(t *testing.T) {
	db := sqlite.NewTestDB(t)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		received []string
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = append(received, r.URL.RequestURI(), r.Header.Get("X-Pin"), string(body))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	defer api.Close()
	now := time.Now()
	pay := &tool.Tool{ID: "tool_01JDPAY0000000000000000000", Tenant: "acme", Name: "pay", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, Revision: 1,
		OperationCount: 1, IndexedAt: now, CreatedAt: now, UpdatedAt: now,
		BaseURL: strings.Replace(api.URL, "http://", "http://svc:s3cretpw@", 1) + "/v1",
		Redact: &redact.Config{Fields: []string{"/arguments/code", "/arguments/cvv", "/arguments/X-Pin",
			"/arguments/otp", "/arguments/card/cvc"}}}
	ops := []tool.Operation{{ID: "pay", Kind: tool.Read, HTTP: &tool.HTTPBinding{Method: "POST", Path: "/cards/{code}/pay",
		Params: []tool.Param{{Name: "code", In: "path"}, {Name: "cvv", In: "query"}, {Name: "page", In: "query"}, {Name: "X-Pin", In: "header"}},
		Body:   &tool.Body{ContentType: "application/json"}}}}
	if err := db.CreateTool(ctx, pay, ops, nil); err != nil {
		t.Fatal(err)
	}
	deployOn(t, db, "paying", `{"tools": ["pay"], "steps": [{"action": "pay", "call": "pay.pay",
		"args": {"code": "'Zq1'", "cvv": "'Zq2'", "page": "'1'", "X-Pin": "'Zq3'", "otp": "'Zq4'", "card": "{'cvc': 'Zq5', 'holder': 'ann'}"}}],
		"outcome": "'paid'"}`, "pay")
	caller := call.New(call.Options{Client: outbound.New(outbound.Options{AllowPrivate: true})})
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Caller: caller, Owner: "replica-a", Lease: time.Minute,
		Redact: &redact.Service{Keys: db}})
	defer r.Close(ctx)
	wf, err := r.Start(ctx, request("paying"))
	if err != nil {
		t.Fatal(err)
	}
	done, steps, err := r.Finished(ctx, "acme", wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != workflow.Completed || len(steps) != 1 {
		t.Fatalf("workflow %s with %d steps (%s)", done.Status, len(steps), done.Error)
	}
	mu.Lock()
	sent := strings.Join(received, "\n")
	mu.Unlock()
	for _, v := range []string{"/v1/cards/Zq1/pay", "cvv=Zq2", "page=1", "Zq3", `"otp":"Zq4"`, `"cvc":"Zq5"`} {
		if !strings.Contains(sent, v) {
			t.Errorf("the API received %s, without %s", sent, v)
		}
	}
	var req struct {
		URL    string              `json:"url"`
		Header map[string][]string `json:"header"`
		Body   map[string]any      `json:"body"`
	}
	if err := json.Unmarshal(steps[0].Request, &req); err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	if err := json.Unmarshal(steps[0].Args, &args); err != nil {
		t.Fatal(err)
	}
	stored := string(steps[0].Request)
	for _, v := range []string{"Zq1", "Zq2", "Zq3", "Zq4", "Zq5", "s3cretpw", "svc@"} {
		if strings.Contains(stored, v) {
			t.Errorf("the stored request holds %q: %s", v, stored)
		}
	}
	token := func(name string) string {
		s, _ := args[name].(string)
		if !strings.HasPrefix(s, "[redacted:field:") {
			t.Errorf("args[%s] = %v, want a token", name, args[name])
		}
		return s
	}
	esc := strings.NewReplacer("[", "%5B", "]", "%5D").Replace
	if want := "/v1/cards/" + esc(token("code")) + "/pay"; !strings.Contains(req.URL, want) {
		t.Errorf("url %s, want the path %s", req.URL, want)
	}
	if want := strings.ReplaceAll(esc(token("cvv")), ":", "%3A"); !strings.Contains(req.URL, "cvv="+want) || !strings.Contains(req.URL, "page=1") {
		t.Errorf("url %s, want cvv=%s and page=1", req.URL, want)
	}
	if got := req.Header["X-Pin"]; len(got) != 1 || got[0] != token("X-Pin") {
		t.Errorf("header X-Pin = %v, want %s", got, token("X-Pin"))
	}
	card, _ := req.Body["card"].(map[string]any)
	if req.Body["otp"] != token("otp") || card["holder"] != "ann" || !strings.HasPrefix(card["cvc"].(string), "[redacted:field:") {
		t.Errorf("body %v: want otp and card.cvc masked, card.holder kept", req.Body)
	}
}
