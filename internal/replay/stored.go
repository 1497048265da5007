package replay

import (
	"encoding/json"
	"fmt"

	"github.com/agentplane/agentplane/internal/problem"
)

// NotFound is a store's answer for a replay it does not have.
func NotFound(id string) error {
	return problem.New(problem.NotFound, "no replay with id %q", id)
}

// Encode is r as the stores keep it: its creator and the replay itself as
// JSON text (the replay's JSON holds neither its tenant nor its creator).
func (r *Replay) Encode() (creator, data string, err error) {
	c, err := json.Marshal(r.Creator)
	if err != nil {
		return "", "", fmt.Errorf("encode replay creator: %w", err)
	}
	d, err := json.Marshal(r)
	if err != nil {
		return "", "", fmt.Errorf("encode replay: %w", err)
	}
	return string(c), string(d), nil
}

// Decode reads a stored replay back from the JSON Encode made; the caller
// sets the columns stored beside it (id, tenant, workflow, target, time),
// which are authoritative.
func Decode(id string, creator, data []byte) (*Replay, error) {
	var r Replay
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode replay %s: %w", id, err)
	}
	if err := json.Unmarshal(creator, &r.Creator); err != nil {
		return nil, fmt.Errorf("decode replay %s creator: %w", id, err)
	}
	if r.Status == "" {
		r.Status = StatusCompleted // stored before replays had statuses
	}
	return &r, nil
}
