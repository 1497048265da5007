package mcp

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

func callRequest(name, args string, meta sdk.Meta) *sdk.CallToolRequest {
	return &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: name, Arguments: json.RawMessage(args), Meta: meta}}
}

// TestCallKey: a call's key comes from _meta or the POST's header, which
// must agree; it is a string of at most 255 characters, scoped to the
// caller and to /mcp.
func TestCallKey(t *testing.T) {
	p := &auth.Principal{Tenant: "acme", Subject: "alice"}
	for _, tc := range []struct {
		name, header string
		meta         any
		want, err    string
	}{
		{name: "none"},
		{name: "meta", meta: "k1", want: "k1"},
		{name: "header", header: "k1", want: "k1"},
		{name: "both equal", header: "k1", meta: "k1", want: "k1"},
		{name: "both differing", header: "k1", meta: "k2", err: "differs from the Idempotency-Key header"},
		{name: "not a string", meta: 7.0, err: "must be a string"},
		{name: "too long", meta: strings.Repeat("k", 256), err: "at most 255 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/mcp", nil)
			r = r.WithContext(frontdoor.WithInfo(r.Context(), &frontdoor.Info{Principal: p}))
			if tc.header != "" {
				r.Header.Set("Idempotency-Key", tc.header)
			}
			var meta sdk.Meta
			if tc.meta != nil {
				meta = sdk.Meta{keyMeta: tc.meta}
			}
			got, err := callKey(r, callRequest(callTool, `{}`, meta))
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(problem.As(err).Detail, tc.err) {
					t.Fatalf("key %v: err %v, want %q", tc.meta, err, tc.err)
				}
			case err != nil:
				t.Fatalf("key %v: %v", tc.meta, err)
			case tc.want == "" && got != "":
				t.Errorf("no key gives %q, want none", got)
			case tc.want != "" && (!strings.HasSuffix(got, "\n/mcp\n"+tc.want) || !strings.HasPrefix(got, p.ID())):
				t.Errorf("key %q stored as %q, want it scoped to %s and /mcp", tc.want, got, p.ID())
			}
		})
	}
}

// TestFingerprint: a call is the same call whatever its arguments' key
// order or spacing, and another one with another tool or other arguments.
func TestFingerprint(t *testing.T) {
	a := fingerprint(callRequest(callTool, `{"tool":"payments","args":{"id":"tx_77"}}`, nil))
	if b := fingerprint(callRequest(callTool, `{ "args": {"id": "tx_77"}, "tool": "payments" }`, nil)); a != b {
		t.Error("key order and spacing change the fingerprint")
	}
	if b := fingerprint(callRequest(callTool, `{"tool":"payments","args":{"id":"tx_78"}}`, nil)); a == b {
		t.Error("other arguments keep the fingerprint")
	}
	if b := fingerprint(callRequest(agentTool+"payments", `{"tool":"payments","args":{"id":"tx_77"}}`, nil)); a == b {
		t.Error("another tool keeps the fingerprint")
	}
	if fingerprint(callRequest(callTool, ``, nil)) != fingerprint(callRequest(callTool, `{}`, nil)) {
		t.Error("no arguments differ from empty arguments")
	}
}
