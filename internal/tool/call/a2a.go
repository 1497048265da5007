package call

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

// prepareA2A builds the blocking SendMessage of a call of a remote A2A
// agent's skill: the message argument is the text part, data the data
// part. The message id is the call's idempotency key when it has one, so
// a repeat is the same message to the remote agent.
func prepareA2A(req tool.CallRequest) (*prepared, error) {
	t, op := req.Tool, req.Operation
	u, err := baseURL(t, t.BaseURL)
	if err != nil {
		return nil, err
	}
	var errs argErrors
	text, ok := req.Args["message"].(string)
	if !ok || text == "" {
		errs.add("message", "is required: the text sent to the remote agent")
	}
	parts := []any{map[string]any{"text": text}}
	if d, ok := present(req.Args, "data"); ok {
		if _, isObject := d.(map[string]any); !isObject {
			errs.add("data", "must be an object: it is sent as the message's data part")
		}
		parts = append(parts, map[string]any{"data": d})
	}
	errs.unknown(req.Args, map[string]bool{"message": true, "data": true}, op.ID)
	if err := errs.err(); err != nil {
		return nil, err
	}
	id := req.IdempotencyKey
	if id == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
		"message":  map[string]any{"messageId": id, "role": wire.RoleUser, "parts": parts},
		"metadata": map[string]any{"skill": op.A2A.Skill},
	}})
	if err != nil {
		return nil, problem.Field("args", "cannot be encoded as JSON")
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/json")
	header.Set("A2A-Version", wire.Version)
	p := &prepared{method: http.MethodPost, url: u, header: header, body: body, recordBody: body, places: []redact.Place{
		{Arg: "/message", In: redact.InBody, Name: "/params/message/parts/0/text"},
		{Arg: "/data", In: redact.InBody, Name: "/params/message/parts/1/data"},
	}}
	p.read = func(_ string, body []byte) (json.RawMessage, string) {
		res, fault, code := readA2A(body)
		p.code = code
		return res, fault
	}
	return p, nil
}

// readA2A reads a SendMessage answer: the result is the final task (or the
// agent's message); a JSON-RPC error, or a task that did not complete, is
// the call's failure, with its error_code when the task waits for input or
// authentication.
func readA2A(body []byte) (json.RawMessage, string, string) {
	var resp struct {
		Result *struct {
			Task    json.RawMessage `json:"task"`
			Message json.RawMessage `json:"message"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return jsonBody(body), "the A2A agent's answer is not a JSON-RPC response", ""
	}
	switch {
	case resp.Error != nil:
		return jsonBody(body), fmt.Sprintf("the A2A agent answered error %d: %s", resp.Error.Code, resp.Error.Message), ""
	case resp.Result == nil:
		return jsonBody(body), "the A2A agent's answer has no result", ""
	case len(resp.Result.Task) == 0:
		return resp.Result.Message, "", ""
	}
	var task wire.Task
	_ = json.Unmarshal(resp.Result.Task, &task)
	why := ""
	if m := task.Status.Message; m != nil {
		for _, p := range m.Parts {
			if p.Text != nil {
				why += *p.Text
			}
		}
	}
	if why != "" {
		why = ": " + why
	}
	switch task.Status.State {
	case wire.TaskStateCompleted:
		return resp.Result.Task, "", ""
	case wire.TaskStateInputRequired:
		return resp.Result.Task, "the remote A2A task needs input a tool call cannot give" + why, tool.CodeInputRequired
	case wire.TaskStateAuthRequired:
		return resp.Result.Task, "the remote A2A task needs authentication a tool call cannot give" + why, tool.CodeAuthRequired
	}
	return resp.Result.Task, "the remote A2A task ended " + string(task.Status.State) + why, ""
}
