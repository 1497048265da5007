package httpapi_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestToolRegisterLimits refuses limits naming the field at fault, and
// operation_limits naming no operation; valid limits are stored and shown.
func TestToolRegisterLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:read tools:write")
	doc, err := os.ReadFile("../tool/soap/testdata/spanish-verbs.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	reg := map[string]any{"name": "facturas", "type": "soap", "spec": string(doc)}

	reg["limits"] = map[string]any{"rate": "50/h", "retries": map[string]any{"max": 11}, "circuit": map[string]any{"failures": 5, "open_for": "soon"}}
	r := h.do("POST", "/v1/tools", tok, reg)
	for _, field := range []string{`"limits.rate"`, `"limits.retries.max"`, `"limits.circuit.open_for"`} {
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), field) {
			t.Errorf("bad limits: %d %s; want 422 naming %s", r.Status, r.Body, field)
		}
	}
	limits := map[string]any{"rate": "50/s", "concurrency": float64(8), "timeout": "10s",
		"retries": map[string]any{"max": float64(3), "on": []any{float64(429), float64(503)}},
		"circuit": map[string]any{"failures": float64(5), "window": "30s", "open_for": "30s"}}
	reg["limits"] = limits
	reg["operation_limits"] = map[string]any{"FECompConsulta": map[string]any{"concurrency": 1}}
	r = h.do("POST", "/v1/tools", tok, reg)
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), `"operation_limits.FECompConsulta"`) {
		t.Fatalf("operation_limits of an unknown operation: %d %s", r.Status, r.Body)
	}
	reg["operation_limits"] = map[string]any{"FECompConsultar": map[string]any{"concurrency": 1}}
	r = h.do("POST", "/v1/tools", tok, reg)
	var created struct {
		ID string `json:"id"`
	}
	r.json(t, &created)
	if r.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	var got struct {
		Limits          map[string]any `json:"limits"`
		OperationLimits map[string]any `json:"operation_limits"`
	}
	h.do("GET", "/v1/tools/"+created.ID, tok, nil).json(t, &got)
	if diff := cmp.Diff(limits, got.Limits); diff != "" {
		t.Errorf("GET limits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"FECompConsultar": map[string]any{"concurrency": float64(1)}}, got.OperationLimits); diff != "" {
		t.Errorf("GET operation_limits (-want +got):\n%s", diff)
	}
}
