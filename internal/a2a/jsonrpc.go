package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/frontdoor/jsonbody"
	"github.com/agentplane/agentplane/internal/problem"
)

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// errRPC is a JSON-RPC error of its own code (parse error, invalid
// request, method not found, invalid params).
type errRPC struct {
	code int
	msg  string
}

func (e *errRPC) Error() string { return e.msg }

// noAgent is the error of a JSON-RPC request to an agent that does not
// exist: a 404 problem, as for any path that leads nowhere.
type noAgent struct{ err error }

func (e *noAgent) Error() string { return e.err.Error() }

// JSONRPC serves the JSON-RPC binding: every answer, error or not, is
// a JSON-RPC response (200), but for an agent that does not exist (404).
func (s *Server) JSONRPC(w http.ResponseWriter, r *http.Request) error {
	req := rpcRequest{ID: json.RawMessage("null")}
	err := s.serveRPC(w, r, &req)
	if err == nil {
		return nil
	}
	var na *noAgent
	if errors.As(err, &na) {
		return na.err
	}
	if sw, ok := w.(interface{ Started() bool }); ok && sw.Started() {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: req.ID, Error: s.rpcErrorOf(r, err)})
}

// rpcErrorOf is the JSON-RPC error of err, with its problem document as data.
func (s *Server) rpcErrorOf(r *http.Request, err error) *rpcError {
	var re *errRPC
	if errors.As(err, &re) {
		return &rpcError{Code: re.code, Message: re.msg}
	}
	pe := problem.As(err)
	info := frontdoor.InfoFrom(r.Context())
	info.Problem = pe
	doc := pe.Doc(r.URL.Path, info.RequestID, info.TraceID)
	return &rpcError{Code: errOf(pe).rpc, Message: doc.Title + ": " + doc.Detail, Data: doc}
}

func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, req *rpcRequest) error {
	var raw json.RawMessage
	if err := frontdoor.DecodeJSON(r, &raw); problem.Is(err, problem.MalformedRequest) {
		return &errRPC{rpcParseError, "Parse error: " + problem.As(err).Detail}
	} else if err != nil {
		return err
	}
	var msg rpcRequest
	if err := json.Unmarshal(raw, &msg); err != nil {
		return &errRPC{rpcInvalidRequest, "Invalid Request: a JSON-RPC request is an object with jsonrpc, id, method and params"}
	}
	if validRPCID(msg.ID) {
		req.ID = msg.ID
	}
	switch {
	case msg.JSONRPC != "2.0":
		return &errRPC{rpcInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`}
	case !validRPCID(msg.ID):
		return &errRPC{rpcInvalidRequest, "Invalid Request: id must be a string or a number"}
	case msg.Method == "":
		return &errRPC{rpcInvalidRequest, "Invalid Request: method is required"}
	}
	info := frontdoor.InfoFrom(r.Context())
	if len(msg.Method) <= 64 {
		info.Details = map[string]any{"a2a_method": msg.Method}
	}
	v, err := s.agent(r)
	if problem.Is(err, problem.NotFound) || problem.Is(err, problem.AgentVersionNotFound) {
		return &noAgent{err}
	}
	if err != nil {
		return err
	}
	c := &call{s: s, w: w, r: r, agent: v.Name, version: v.Version, description: v.Description, rpc: true, event: func(v any) any {
		return rpcResponse{JSONRPC: "2.0", ID: msg.ID, Result: v}
	}}
	var res any
	switch msg.Method {
	case "SendMessage", "SendStreamingMessage":
		var p wire.SendMessageRequest
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		if msg.Method == "SendStreamingMessage" {
			_, err := c.traced(msg.Method, sendAttrs(p), func() (any, error) { return nil, c.sendStreamingMessage(p) })
			return err
		}
		res, err = c.traced(msg.Method, sendAttrs(p), func() (any, error) { return c.sendMessage(p) })
	case "GetTask", "CancelTask", "SubscribeToTask":
		var p wire.TaskRequest
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		attrs := taskRequestAttrs(p.Tenant, p.ID)
		switch msg.Method {
		case "GetTask":
			res, err = c.traced(msg.Method, attrs, func() (any, error) { return c.getTask(p.ID) })
		case "CancelTask":
			res, err = c.traced(msg.Method, attrs, func() (any, error) { return c.cancelTask(p.ID) })
		default:
			_, err := c.traced(msg.Method, attrs, func() (any, error) { return nil, c.subscribe(p.ID) })
			return err
		}
	case "ListTasks":
		var p wire.ListTasksRequest
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		res, err = c.traced(msg.Method, taskRequestAttrs(p.Tenant, ""), func() (any, error) { return c.listTasks(p) })
	case "CreateTaskPushNotificationConfig":
		var p wire.TaskPushNotificationConfig
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		res, err = c.traced(msg.Method, taskRequestAttrs(p.Tenant, p.TaskID), func() (any, error) { return c.createPushConfig(p) })
	case "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		var p wire.PushConfigRequest
		if err := rpcParams(msg.Params, &p); err != nil {
			return err
		}
		res, err = c.traced(msg.Method, taskRequestAttrs(p.Tenant, p.TaskID), func() (any, error) {
			switch msg.Method {
			case "GetTaskPushNotificationConfig":
				return c.getPushConfig(p)
			case "DeleteTaskPushNotificationConfig":
				return c.deletePushConfig(p)
			}
			return c.listPushConfigs(p)
		})
	case "GetExtendedAgentCard":
		_, err := c.traced(msg.Method, nil, func() (any, error) { return nil, errNoExtendedCard })
		return err
	default:
		m := msg.Method
		if len(m) > 64 {
			m = m[:64] + "…"
		}
		return &errRPC{rpcMethodNotFound, fmt.Sprintf("Method not found: %q is not an A2A 1.0 method", m)}
	}
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: msg.ID, Result: res})
}

// validRPCID reports whether id is a JSON-RPC request id: a string or a number.
func validRPCID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// rpcParams decodes a method's params, which must be an object with no
// unknown members.
func rpcParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if raw[0] != '{' {
		return &errRPC{rpcInvalidParams, "Invalid params: params must be an object"}
	}
	if err := jsonbody.Decode(raw, v); err != nil {
		return &errRPC{rpcInvalidParams, "Invalid params: " + problem.As(err).Detail}
	}
	return nil
}
