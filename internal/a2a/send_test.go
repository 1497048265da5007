package a2a

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/agentplane/agentplane/internal/a2a/wire"
)

// message is a message of the goal "triage" and the data part data.
func message(data string) *wire.Message {
	goal := "triage"
	return &wire.Message{MessageID: "m-1", Parts: []wire.Part{{Text: &goal}, {Data: json.RawMessage(data)}}}
}

// floatFingerprint is a message's fingerprint as it was when the data
// part was decoded as float64s: the SHA-256 of the RFC 8785 form of the
// goal, context and task id.
func floatFingerprint(t *testing.T, data, taskID string) string {
	t.Helper()
	var ctx map[string]any
	if err := json.Unmarshal([]byte(data), &ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"goal": "triage", "context": ctx, "taskId": taskID})
	canon, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// TestFingerprintOfOrdinaryNumbersIsUnchanged: a message whose numbers a
// double holds has, number for number, the fingerprint it had when its
// context was decoded as float64s, however the numbers are written, so a
// retry sent before an upgrade and repeated after it finds its task.
func TestFingerprintOfOrdinaryNumbersIsUnchanged(t *testing.T) {
	for _, data := range []string{
		`{}`,
		`{"transaction_id": "tx-9", "amount": 12.50, "count": 3, "flag": true, "none": null}`,
		`{"a": 1.0, "b": 1e2, "c": -0, "d": 0.1, "e": 1E21, "f": 5e-324, "g": 1.7976931348623157e308}`,
		`{"largest": 9007199254740992, "below": -9007199254740992, "round": 1234567890123456800}`,
		`{"nested": {"ids": [1, 2.5, {"x": 100000000000000000000}]}}`,
	} {
		for _, taskID := range []string{"", "task-1"} {
			in, err := messageInput(message(data))
			if err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			if got, want := in.fingerprint(taskID), floatFingerprint(t, data, taskID); got != want {
				t.Errorf("%s, task %q: fingerprint %s, want %s as before", data, taskID, got, want)
			}
		}
	}
}

// TestContextKeepsEveryDigit: an integer past 2^53 in the data part stays
// as it was written in the context, and counts in the fingerprint with
// every digit: a message with another such integer, which a float64 would
// round to the same double, is another message.
func TestContextKeepsEveryDigit(t *testing.T) {
	in, err := messageInput(message(`{"id": 1234567890123456789, "amount": 12.50}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Context["id"]; got != json.Number("1234567890123456789") {
		t.Errorf("context id %#v, want json.Number 1234567890123456789", got)
	}
	other, err := messageInput(message(`{"id": 1234567890123456788, "amount": 12.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.fingerprint("") == other.fingerprint("") {
		t.Errorf("ids 1234567890123456789 and 1234567890123456788 have the same fingerprint")
	}
	same, err := messageInput(message(`{"amount": 1.25e1, "id": 1234567890123456789}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.fingerprint("") != same.fingerprint("") {
		t.Errorf("the same context written otherwise has another fingerprint")
	}
}
