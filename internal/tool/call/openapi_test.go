package call

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

var chargeSchema = json.RawMessage(`{
	"type": "object",
	"required": ["amount"],
	"properties": {
		"amount": {"type": "integer", "minimum": 1},
		"currency": {"type": "string", "nullable": true}
	}
}`)

func billingOps() (create, get, cancel *tool.Operation) {
	create = &tool.Operation{ID: "create_charge", Kind: tool.Write, HTTP: &tool.HTTPBinding{
		Method: "post",
		Path:   "/customers/{customer_id}/charges",
		Params: []tool.Param{
			{Name: "customer_id", In: "path", Required: true},
			{Name: "expand", In: "query"},
			{Name: "X-Request-Source", In: "header"},
		},
		Body: &tool.Body{Required: true, ContentType: "application/json", Schema: chargeSchema},
	}}
	get = &tool.Operation{ID: "get_customer", Kind: tool.Read, HTTP: &tool.HTTPBinding{
		Method: "GET",
		Path:   "/customers/{customer_id}",
		Params: []tool.Param{
			{Name: "customer_id", In: "path", Required: true},
			{Name: "fields", In: "query"},
		},
	}}
	cancel = &tool.Operation{ID: "cancel_charge", Kind: tool.Write, HTTP: &tool.HTTPBinding{
		Method: "DELETE",
		Path:   "/charges/{id}",
		Params: []tool.Param{{Name: "id", In: "path", Required: true}},
	}}
	return create, get, cancel
}

func TestCallOpenAPI(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tokens := newTokenServer(t, "billing-client", testSecret)
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{ "id": "ch_1", "amount": 500 }`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"cus/42","name":"Ada"}`))
	})
	billing := &tool.Tool{
		ID: "tool_billing", Name: "billing", Type: tool.OpenAPI, BaseURL: api.URL + "/v1/",
		Revision: 3, IdempotencySupport: true, SpecTokenURL: tokens.URL + "/token",
		Auth: tool.Auth{Type: tool.AuthOAuth2, SecretsRef: "env://TOOL_SECRET", ClientID: "billing-client", Scopes: []string{"charges:write", "customers:read"}},
	}
	create, get, cancel := billingOps()
	store := &memAudit{}
	fixed := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ex := newExecutor(t, Options{Audit: store, Now: func() time.Time { return fixed }})

	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "step")
	defer span.End()

	calls := []tool.CallRequest{
		{Tool: billing, Operation: create, IdempotencyKey: "idem-1", Args: map[string]any{
			"customer_id": "cus/42", "expand": []any{"customer", "invoice"}, "X-Request-Source": "agent",
			"amount": float64(500), "currency": nil,
		}},
		{Tool: billing, Operation: get, IdempotencyKey: "idem-2", Args: map[string]any{"customer_id": "cus/42", "fields": "name"}},
		{Tool: billing, Operation: create, Args: map[string]any{"customer_id": "c1", "body": map[string]any{"amount": float64(7)}}},
		{Tool: billing, Operation: cancel, Args: map[string]any{"id": "ch_1"}},
	}
	var results []tool.CallResult
	for _, req := range calls {
		req.Tenant, req.WorkflowID, req.RequestID = "acme", "wf_1", "req_1"
		req.Actor = audit.Actor{Sub: "user-1", ClientID: "cli"}
		res, err := ex.Call(ctx, req)
		if err != nil {
			t.Fatalf("Call %s: %v", req.Operation.ID, err)
		}
		results = append(results, res)
	}

	type sent struct {
		Method, Path, Query, Authorization, IdempotencyKey, Source, ContentType, Body string
	}
	var got []sent
	for _, r := range api.requests() {
		got = append(got, sent{r.Method, r.Path, r.Query, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"),
			r.Header.Get("X-Request-Source"), r.Header.Get("Content-Type"), r.Body})
		if tp := r.Header.Get("traceparent"); !strings.HasPrefix(tp, "00-"+span.SpanContext().TraceID().String()+"-") {
			t.Errorf("%s %s: traceparent = %q, want the caller's trace", r.Method, r.Path, tp)
		}
	}
	want := []sent{
		{"POST", "/v1/customers/cus%2F42/charges", "expand=customer&expand=invoice", "Bearer access-token-1", "idem-1", "agent", "application/json", `{"amount":500,"currency":null}`},
		{"GET", "/v1/customers/cus%2F42", "fields=name", "Bearer access-token-1", "", "", "", ""},
		{"POST", "/v1/customers/c1/charges", "", "Bearer access-token-1", "", "", "application/json", `{"amount":7}`},
		{"DELETE", "/v1/charges/ch_1", "", "Bearer access-token-1", "", "", "", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests the API saw (-want +got):\n%s", diff)
	}
	if n := tokens.count(); n != 1 {
		t.Errorf("token endpoint issued %d tokens for %d calls, want 1 (cached)", n, len(calls))
	}
	if diff := cmp.Diff([]string{"charges:write customers:read"}, tokens.scopes); diff != "" {
		t.Errorf("requested scopes (-want +got):\n%s", diff)
	}

	wantFirst := tool.CallResult{
		Status: http.StatusCreated,
		Body:   json.RawMessage(`{"id":"ch_1","amount":500}`),
		Request: tool.RecordedRequest{
			Method: "POST",
			URL:    api.URL + "/v1/customers/cus%2F42/charges?expand=customer&expand=invoice",
			Header: map[string][]string{
				"Accept":           {"application/json"},
				"Content-Type":     {"application/json"},
				"Idempotency-Key":  {"idem-1"},
				"X-Request-Source": {"agent"},
			},
			Body: json.RawMessage(`{"amount":500,"currency":null}`),
			// Where each argument went, for redaction: the escaped
			// customer_id is bytes 14 to 22 of the path.
			Places: []redact.Place{
				{Arg: "/expand", In: redact.InQuery, Name: "expand"},
				{Arg: "/X-Request-Source", In: redact.InHeader, Name: "X-Request-Source"},
				{Arg: "/amount", In: redact.InBody, Name: "/amount"},
				{Arg: "/currency", In: redact.InBody, Name: "/currency"},
				{Arg: "/customer_id", In: redact.InPath, Start: 14, End: 22},
			},
		},
		Attempts: 1,
	}
	if diff := cmp.Diff(wantFirst, results[0], cmpopts.IgnoreFields(tool.CallResult{}, "Duration")); diff != "" {
		t.Errorf("first result (-want +got):\n%s", diff)
	}

	recs := store.recs
	if len(recs) != len(calls) {
		t.Fatalf("%d audit records, want %d", len(recs), len(calls))
	}
	wantRec := audit.Record{
		Time: fixed, Tenant: "acme", Actor: audit.Actor{Sub: "user-1", ClientID: "cli"},
		Action: "tool.call", Resource: audit.Resource{Type: "tool", ID: "tool_billing"},
		Outcome: audit.Success, Status: 201, RequestID: "req_1", WorkflowID: "wf_1",
		TraceID: span.SpanContext().TraceID().String(),
		Details: json.RawMessage(`{"attempts":1,"duration_ms":0,"kind":"write","method":"POST","operation":"create_charge","type":"openapi","url":"` +
			api.URL + `/v1/customers/cus%2F42/charges"}`),
	}
	if diff := cmp.Diff(wantRec, recs[0]); diff != "" {
		t.Errorf("audit record (-want +got):\n%s", diff)
	}
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), testSecret) || strings.Contains(string(b), "access-token") || strings.Contains(string(b), "amount") {
			t.Errorf("audit record carries a secret or a body: %s", b)
		}
	}
	for _, r := range results {
		b, _ := json.Marshal(r.Request)
		if strings.Contains(string(b), "access-token") || strings.Contains(string(b), "Authorization") {
			t.Errorf("recorded request carries credentials: %s", b)
		}
	}
}

func TestCallArgumentErrors(t *testing.T) {
	create, get, _ := billingOps()
	billing := &tool.Tool{ID: "tool_b", Name: "billing", Type: tool.OpenAPI, BaseURL: "http://127.0.0.1:9/v1"}
	noBase := &tool.Tool{ID: "tool_n", Name: "nobase", Type: tool.OpenAPI}
	tests := []struct {
		name   string
		tool   *tool.Tool
		op     *tool.Operation
		args   map[string]any
		fields []string
	}{
		{"missing path parameter", billing, get, map[string]any{}, []string{"customer_id"}},
		{"unknown argument without a body", billing, get, map[string]any{"customer_id": "c", "colour": "red", "age": 3.0}, []string{"age", "colour"}},
		{"missing required body", billing, create, map[string]any{"customer_id": "c"}, []string{"body"}},
		{"body breaks schema", billing, create, map[string]any{"customer_id": "c", "amount": 0.0}, []string{"body/amount"}},
		{"body lacks required property", billing, create, map[string]any{"customer_id": "c", "currency": "EUR"}, []string{"body"}},
		{"wrong type", billing, create, map[string]any{"customer_id": "c", "body": map[string]any{"amount": "ten"}}, []string{"body/amount"}},
		{"no base URL", noBase, get, map[string]any{"customer_id": "c"}, []string{"endpoint_url"}},
	}
	ex := newExecutor(t, Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ex.Call(context.Background(), tool.CallRequest{Tenant: "acme", Tool: tc.tool, Operation: tc.op, Args: tc.args})
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.ValidationFailed {
				t.Fatalf("Call error = %v, want validation-failed", err)
			}
			var fields []string
			for _, f := range pe.Errors {
				fields = append(fields, f.Field)
				if f.Message == "" {
					t.Errorf("field %s has no message", f.Field)
				}
			}
			if diff := cmp.Diff(tc.fields, fields); diff != "" {
				t.Errorf("fields at fault (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("messages", func(t *testing.T) {
		_, err := ex.Call(context.Background(), tool.CallRequest{Tool: billing, Operation: get, Args: map[string]any{"colour": "red"}})
		want := outcome{Code: problem.ValidationFailed, Msg: "2 fields are invalid", Fields: []problem.FieldError{
			{Field: "customer_id", Message: "is required (path parameter)"},
			{Field: "colour", Message: "is not an argument of operation get_customer"},
		}}
		if diff := cmp.Diff(want, outcomeOf(err)); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})
}

func TestCallRefusesPrivateAddress(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {})
	_, get, _ := billingOps()
	ex := New(Options{Client: outbound.New(outbound.Options{})}) // refuses loopback
	_, err := ex.Call(context.Background(), tool.CallRequest{
		Tool:      &tool.Tool{ID: "t", Name: "t", BaseURL: api.URL},
		Operation: get, Args: map[string]any{"customer_id": "c"},
	})
	if diff := cmp.Diff(outcome{Code: problem.URLNotAllowed, Msg: "127.0.0.1 is a loopback address; the server's operator can allow such addresses with agentplane serve --allow-private-networks (on with --demo), or one host with --allow-private-host HOST[:PORT]"}, outcomeOf(err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if n := len(api.requests()); n != 0 {
		t.Errorf("the API got %d requests", n)
	}
}

func TestCallLimits(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		switch r.URL.Path {
		case "/customers/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 100)))
		case "/customers/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		case "/customers/text":
			_, _ = w.Write([]byte("plain words"))
		}
	})
	_, get, _ := billingOps()
	ex := newExecutor(t, Options{MaxResponseBytes: 16, Timeout: 150 * time.Millisecond})
	tests := []struct {
		id       string
		want     outcome
		wantBody string
	}{
		{"big", outcome{Status: 200, Msg: "the answer is over the size limit of 16 bytes"}, ""},
		{"slow", outcome{Msg: "the API could not be reached: timed out after 150ms"}, ""},
		{"text", outcome{}, `"plain words"`},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			res, err := ex.Call(context.Background(), tool.CallRequest{
				Tool:      &tool.Tool{ID: "t", Name: "t", BaseURL: api.URL},
				Operation: get, Args: map[string]any{"customer_id": tc.id},
			})
			if diff := cmp.Diff(tc.want, outcomeOf(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if string(res.Body) != tc.wantBody {
				t.Errorf("body = %s, want %s", res.Body, tc.wantBody)
			}
		})
	}
}
