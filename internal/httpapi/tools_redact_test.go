package httpapi_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestToolRegisterRedact refuses a pointer that is not RFC 6901 or not
// rooted at a document of the call, naming it, and an unknown detector,
// listing the known ones; a valid redaction is stored, shown and replaced
// by PUT.
func TestToolRegisterRedact(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:read tools:write")
	doc, err := os.ReadFile("../tool/soap/testdata/spanish-verbs.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	reg := map[string]any{"name": "facturas", "type": "soap", "spec": string(doc)}
	reg["redact"] = map[string]any{"fields": []string{"/response/body/email", "response/body/iban", "/arguments/a~2"},
		"detect": []string{"email", "ssn"}}
	r := h.do("POST", "/v1/tools", tok, reg)
	for _, want := range []string{`"redact.fields[1]"`, `"redact.fields[2]"`, `"redact.detect[1]"`, "RFC 6901",
		"email, iban, payment_card, phone, ip_address"} {
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), want) {
			t.Errorf("bad redact: %d %s; want 422 with %s", r.Status, r.Body, want)
		}
	}
	if strings.Contains(string(r.Body), `"redact.fields[0]"`) {
		t.Errorf("a valid pointer refused: %s", r.Body)
	}
	redact := map[string]any{"fields": []any{"/response/body/customer/email", "/arguments/iban"},
		"headers": []any{"X-Customer"}, "detect": []any{"payment_card"}}
	reg["redact"] = redact
	r = h.do("POST", "/v1/tools", tok, reg)
	var created struct {
		ID string `json:"id"`
	}
	r.json(t, &created)
	if r.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	var got struct {
		Redact map[string]any `json:"redact"`
	}
	h.do("GET", "/v1/tools/"+created.ID, tok, nil).json(t, &got)
	if diff := cmp.Diff(redact, got.Redact); diff != "" {
		t.Errorf("GET redact (-want +got):\n%s", diff)
	}
	delete(reg, "redact")
	if r := h.do("PUT", "/v1/tools/"+created.ID, tok, reg); r.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	got.Redact = nil
	h.do("GET", "/v1/tools/"+created.ID, tok, nil).json(t, &got)
	if got.Redact != nil {
		t.Errorf("PUT without redact kept %v", got.Redact)
	}
}
