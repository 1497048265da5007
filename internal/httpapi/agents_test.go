package httpapi_test

import "testing"

func TestAgentPathsRefuseAMisplacedVersion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newFraudWorld(t, h)
	for _, tc := range []struct {
		name, method, path string
		body               any
		code               string
	}{
		{"versions of a version", "GET", "/v1/agents/fraud-triage@1/versions", nil, "not-found"},
		{"default of a version", "PUT", "/v1/agents/fraud-triage@1/default", map[string]any{"version": "1"}, "not-found"},
		{"empty version", "GET", "/v1/agents/fraud-triage@", nil, "agent-version-not-found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(tc.method, tc.path, w.admin, tc.body)
			if r.Status != 404 || string(r.problem(t).Code) != tc.code {
				t.Fatalf("%d %s, want 404 %s", r.Status, r.Body, tc.code)
			}
		})
	}
	// The same routes answer for the bare name.
	if r := h.do("GET", "/v1/agents/fraud-triage/versions", w.admin, nil); r.Status != 200 {
		t.Fatalf("versions: %d %s", r.Status, r.Body)
	}
	if r := h.do("PUT", "/v1/agents/fraud-triage/default", w.admin, map[string]any{"version": "1"}); r.Status != 200 {
		t.Fatalf("default: %d %s", r.Status, r.Body)
	}
}
