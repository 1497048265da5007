package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Hash is the hex SHA-256 of the request's canonical JSON (CanonicalJSON):
// a recorded completion is served again (on resume or in a replay) only to
// a request with the same hash.
func (r ChatRequest) Hash() (string, error) {
	if canon, ok := r.canonical(); ok {
		sum := sha256.Sum256(canon)
		return hex.EncodeToString(sum[:]), nil
	}
	return r.hashOfEncoding()
}

// hashOfEncoding is Hash the long way: the request encoded, then
// canonicalized. canonical is held to it.
func (r ChatRequest) hashOfEncoding() (string, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("marshal chat request: %w", err)
	}
	canon, err := CanonicalJSON(raw)
	if err != nil {
		return "", fmt.Errorf("canonicalize chat request: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// RecordedCompletion is a completion as a workflow's history keeps it: the
// hash of the request beside the model's answer, and the whole request
// (records made before it was kept have none).
type RecordedCompletion struct {
	RequestSHA256 string       `json:"request_sha256"`
	Request       *ChatRequest `json:"request,omitempty"`
	Response      ChatResponse `json:"response"`
}

// DecodeCompletion reads a recorded completion. A record made before
// requests were hashed holds the response alone and has no hash.
func DecodeCompletion(raw json.RawMessage) (RecordedCompletion, error) {
	var rc struct {
		RequestSHA256 string           `json:"request_sha256"`
		Request       *ChatRequest     `json:"request"`
		Response      *json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(raw, &rc); err != nil {
		return RecordedCompletion{}, fmt.Errorf("recorded completion: %w", err)
	}
	out := RecordedCompletion{RequestSHA256: rc.RequestSHA256, Request: rc.Request}
	body := raw
	if rc.Response != nil {
		body = *rc.Response
	}
	if err := json.Unmarshal(body, &out.Response); err != nil {
		return RecordedCompletion{}, fmt.Errorf("recorded completion: %w", err)
	}
	return out, nil
}
