package mcp

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// The SDK knows nothing of tasks, so the answers that advertise them are
// its answers with the tasks added: initialize (the 2025-11-25 tasks
// capability, and the extension), server/discover (the extension), and
// tools/list (each agent tool's execution.taskSupport, which 2025-11-25
// clients read before they ask for a task).

// tasksCapability is the 2025-11-25 tasks capability: tasks/list,
// tasks/cancel, and tools/call as a task.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// advertise is the change to the result of a method's answer, or nil for a
// method whose answer stays as the SDK gave it.
func advertise(method string) func(result map[string]json.RawMessage) {
	switch method {
	case "initialize":
		return func(res map[string]json.RawMessage) {
			res["capabilities"] = withCapabilities(res["capabilities"], true)
		}
	case "server/discover":
		return func(res map[string]json.RawMessage) {
			res["capabilities"] = withCapabilities(res["capabilities"], false)
		}
	case "tools/list":
		return func(res map[string]json.RawMessage) {
			var tools []map[string]json.RawMessage
			if json.Unmarshal(res["tools"], &tools) != nil {
				return
			}
			for _, tl := range tools {
				var name string
				if json.Unmarshal(tl["name"], &name) == nil && strings.HasPrefix(name, agentTool) {
					tl["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
				}
			}
			res["tools"], _ = json.Marshal(tools)
		}
	}
	return nil
}

// withCapabilities adds the Tasks extension to capabilities, and with
// legacy the 2025-11-25 tasks capability.
func withCapabilities(raw json.RawMessage, legacy bool) json.RawMessage {
	caps := map[string]json.RawMessage{}
	_ = json.Unmarshal(raw, &caps)
	exts := map[string]json.RawMessage{}
	_ = json.Unmarshal(caps["extensions"], &exts)
	exts[extTasks] = json.RawMessage(`{}`)
	caps["extensions"], _ = json.Marshal(exts)
	if legacy {
		caps["tasks"] = tasksCapability
	}
	b, _ := json.Marshal(caps)
	return b
}

// recorder holds the SDK's answer for advertise to change.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rw *recorder) Header() http.Header { return rw.header }

func (rw *recorder) WriteHeader(status int) {
	if rw.status == 0 {
		rw.status = status
	}
}

func (rw *recorder) Write(b []byte) (int, error) {
	rw.WriteHeader(http.StatusOK)
	return rw.body.Write(b)
}

// flush writes the answer held, its JSON-RPC result changed by add when it
// is one; any other answer (an error, an event stream) as it is.
func (rw *recorder) flush(w http.ResponseWriter, add func(map[string]json.RawMessage)) {
	body := rw.body.Bytes()
	ct, _, _ := mime.ParseMediaType(rw.header.Get("Content-Type"))
	if rw.status == http.StatusOK && ct == "application/json" {
		var resp map[string]json.RawMessage
		if json.Unmarshal(body, &resp) == nil && resp["result"] != nil {
			var res map[string]json.RawMessage
			if json.Unmarshal(resp["result"], &res) == nil {
				add(res)
				resp["result"], _ = json.Marshal(res)
				if b, err := json.Marshal(resp); err == nil {
					body = b
				}
			}
		}
	}
	for k, v := range rw.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	w.WriteHeader(rw.status)
	_, _ = w.Write(body)
}
