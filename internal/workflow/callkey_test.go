package workflow

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/redact"
)

// TestCallsDifferByEveryDigit: two calls whose integer arguments share a
// double are different calls, to the journal of an external run and to a
// resumed definition, while a call recorded before arguments kept their
// digits (its numbers float64s) still matches the call made again.
func TestCallsDifferByEveryDigit(t *testing.T) {
	n := func(s string) json.Number { return json.Number(s) }
	for _, tc := range []struct {
		name     string
		recorded string
		args     map[string]any
		same     bool
	}{
		{"the same id", `{"id":1234567890123456789}`, map[string]any{"id": n("1234567890123456789")}, true},
		{"another id with the same double", `{"id":1234567890123456788}`, map[string]any{"id": n("1234567890123456789")}, false},
		{"the double the id was sent as before", `{"id":1234567890123456800}`, map[string]any{"id": n("1234567890123456789")}, false},
		{"recorded as float64s", `{"amount":1,"big":1e+21,"page":{"size":2.5}}`,
			map[string]any{"amount": n("1.0"), "big": n("1e21"), "page": map[string]any{"size": n("2.50")}}, true},
		{"recorded as a float64 past 2^53", `{"n":1234567890123456800}`, map[string]any{"n": 1234567890123456789.0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(tc.args)
			if same := callKey("t", "o", json.RawMessage(tc.recorded)) == callKey("t", "o", raw); same != tc.same {
				t.Errorf("journal keys alike: %v, want %v", same, tc.same)
			}
			s := &Step{Step: 1, Action: "a", Tool: "t", Operation: "o", Status: agent.StatusOK, Args: json.RawMessage(tc.recorded)}
			err := sameCall(1, s, agent.ToolCall{Action: "a", Tool: "t", Operation: "o", Args: tc.args})
			if tc.same && err != nil || !tc.same && !errors.Is(err, ErrNondeterministic) {
				t.Errorf("resumed: %v, want the same call: %v", err, tc.same)
			}
		})
	}
}

// fixedKey is a KeyStore with one key for every tenant.
type fixedKey []byte

func (k fixedKey) RedactionKey(context.Context, string, []byte) ([]byte, error) { return k, nil }

// TestRequestsDifferByEveryDigit: two model requests alike but for an
// integer past 2^53 that shares its double with the other's (a tool's
// input in the conversation, a tool's schema) are two requests to an
// external run's journal and dry run and to a definition's record, masked
// or not, while a request whose numbers are float64s, as json.Marshal
// writes them, keeps the key of its RFC 8785 form, which its record
// holds.
func TestRequestsDifferByEveryDigit(t *testing.T) {
	mask, err := (&redact.Service{Keys: fixedKey("0123456789abcdef0123456789abcdef")}).Masker(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	body := func(id string) []byte {
		return []byte(`{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":"Ask ann.owner@example.com."},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"tu_1","name":"payments__get","input":{"id":` + id + `}}]}]}`)
	}
	request := func(id string) agent.ChatRequest {
		return agent.ChatRequest{Model: "m", Messages: []agent.ChatMessage{{Role: agent.RoleUser, Content: "Ask ann.owner@example.com."}},
			Tools: []agent.ChatTool{{Name: "payments__get", Parameters: json.RawMessage(`{"properties":{"id":{"const":` + id + `}}}`)}}}
	}
	sum := func(canon []byte) string {
		s := sha256.Sum256(canon)
		return hex.EncodeToString(s[:])
	}
	for _, tc := range []struct {
		name   string
		rec    *recorder
		masked func([]byte) []byte
	}{
		{"as sent", &recorder{}, func(b []byte) []byte { return b }},
		{"masked", &recorder{mask: mask, detect: []string{redact.Email}}, func(b []byte) []byte { return mask.JSON(b, "", nil, []string{redact.Email}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &externalRun{rec: tc.rec}
			wire := func(b []byte) string {
				t.Helper()
				key, err := x.requestKey(&exchange{api: llm.Messages, body: b})
				if err != nil {
					t.Fatal(err)
				}
				return key
			}
			hash := func(r agent.ChatRequest) string {
				t.Helper()
				h, err := RequestHash(tc.rec.mask, tc.rec.detect, r)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			if wire(body("1234567890123456789")) == wire(body("1234567890123456788")) {
				t.Error("two relayed requests share a key")
			}
			if hash(request("1234567890123456789")) == hash(request("1234567890123456788")) {
				t.Error("two chat requests share a hash")
			}

			floats := body("1234567890123456800")
			if tc.rec.mask != nil && bytes.Equal(tc.masked(floats), floats) {
				t.Fatalf("nothing of %s is masked", floats)
			}
			canon, err := jcs.Transform(tc.masked(floats))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := wire(floats), wireKey(llm.Messages, canon); got != want {
				t.Errorf("relayed request of float64s: key %s, want %s, its RFC 8785 form's", got, want)
			}
			raw, _ := json.Marshal(request("1234567890123456800"))
			if canon, err = jcs.Transform(tc.masked(raw)); err != nil {
				t.Fatal(err)
			}
			if got, want := hash(request("1234567890123456800")), sum(canon); got != want {
				t.Errorf("chat request of float64s: hash %s, want %s, its RFC 8785 form's", got, want)
			}
		})
	}
}
