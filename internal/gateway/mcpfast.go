package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// The fast path answers the messages an agent's client sends most (initialize,
// its notifications, ping, tools/list, tools/call), well formed, itself, as
// the SDK's stateless handler answers them; anything else, and anything it
// would refuse, goes to the SDK. A stateless SDK request builds a session and
// decodes the message several times, which costs more than the call it
// carries.

// Protocol revisions, as the SDK names them.
const (
	revStateless = "2026-07-28" // requests carry _meta; no initialize
	revLegacy    = "2025-11-25" // what initialize answers a client it cannot match
)

// legacyRevisions are the revisions initialize negotiates.
var legacyRevisions = slices.DeleteFunc(sdk.SupportedProtocolVersions(), func(v string) bool { return v >= revStateless })

// Metadata keys of a stateless request and its result.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// fastMessage is a JSON-RPC message as the fast path reads it.
type fastMessage struct {
	JSONRPC string
	ID      json.RawMessage
	Method  string
	Params  json.RawMessage
}

// fastParams are the parameters the fast path reads.
type fastParams struct {
	Meta      map[string]json.RawMessage
	Name      *string
	Arguments json.RawMessage
	Cursor    *string
	Version   string
}

// fastFields decodes a JSON object's members, matching names exactly as
// the SDK does (encoding/json would take "ID" for "id").
func fastFields(raw []byte, dst map[string]any) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for k, v := range m {
		if d, ok := dst[k]; ok {
			if raw, ok := d.(*json.RawMessage); ok {
				*raw = v
			} else if json.Unmarshal(v, d) != nil {
				return false
			}
		}
	}
	return true
}

// initializeResult is the result of initialize.
type initializeResult struct {
	ProtocolVersion string              `json:"protocolVersion"`
	Capabilities    json.RawMessage     `json:"capabilities"`
	ServerInfo      *sdk.Implementation `json:"serverInfo"`
	Instructions    string              `json:"instructions,omitempty"`
}

// discoverResult is the result of server/discover.
type discoverResult struct {
	TTLMs             int             `json:"ttlMs"`
	CacheScope        string          `json:"cacheScope,omitempty"`
	SupportedVersions []string        `json:"supportedVersions"`
	Capabilities      json.RawMessage `json:"capabilities"`
	Instructions      string          `json:"instructions,omitempty"`
}

// capabilities are the server's capabilities as the SDK declares them by
// default: logging, and tools once there are some.
func (m *mcpServer) capabilities(run mcpRun) json.RawMessage {
	if len(m.attemptOf(run).tools) > 0 {
		return json.RawMessage(`{"logging":{},"tools":{"listChanged":true}}`)
	}
	return json.RawMessage(`{"logging":{}}`)
}

// serve answers a request of run, by the fast path when it can.
func (m *mcpServer) serve(w http.ResponseWriter, r *http.Request, run mcpRun) {
	if r.Method != http.MethodPost || r.Body == nil {
		m.sdkServe(w, r, run)
		return
	}
	// Read here for both paths, so that a body over the route's limit is
	// refused alike, never handed on cut short.
	body, err := frontdoor.ReadBody(r)
	if err != nil {
		pe := problem.As(err) // too large (413) or cut off (400)
		writeMCPError(w, problem.Status(pe.Code), workflow.GatewayInvalidRequest, pe.Detail)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !fastHeaders(r.Header) || !m.fast(w, r, run, body) {
		m.sdkServe(w, r, run)
	}
}

// fastHeaders reports whether the SDK would take a request's headers as
// they are: JSON, an Accept of both JSON and an event stream, a revision
// it supports, no Last-Event-ID.
func fastHeaders(h http.Header) bool {
	if ct, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || ct != "application/json" {
		return false
	}
	if len(h.Values("Last-Event-Id")) > 0 {
		return false
	}
	var jsonOK, streamOK bool
	for _, v := range h.Values("Accept") {
		for _, t := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(t, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	v := h.Get("Mcp-Protocol-Version")
	return jsonOK && streamOK && (v == "" || v == revStateless || slices.Contains(legacyRevisions, v))
}

// fast answers body's message if it is one the fast path answers, and
// reports whether it did; it writes nothing when it did not.
func (m *mcpServer) fast(w http.ResponseWriter, r *http.Request, run mcpRun, body []byte) bool {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	var msg fastMessage
	if !fastFields(body, map[string]any{"jsonrpc": &msg.JSONRPC, "id": &msg.ID, "method": &msg.Method, "params": &msg.Params}) ||
		msg.JSONRPC != "2.0" || !fastID(msg.ID) {
		return false
	}
	var p fastParams
	if len(msg.Params) > 0 && string(msg.Params) != "null" {
		if msg.Params[0] != '{' || !fastFields(msg.Params, map[string]any{
			"_meta": &p.Meta, "name": &p.Name, "arguments": &p.Arguments, "cursor": &p.Cursor, "protocolVersion": &p.Version}) {
			return false
		}
	} else if msg.Method != "ping" && msg.Method != "tools/list" && msg.Method != "notifications/initialized" {
		// The SDK refuses the others without parameters.
		return false
	}
	header := r.Header.Get("Mcp-Protocol-Version")
	if msg.ID == nil {
		// A notification: the SDK takes those it knows with 202.
		switch msg.Method {
		case "notifications/initialized", "notifications/cancelled", "notifications/progress", "notifications/roots/list_changed":
		default:
			return false
		}
		if header == revStateless && r.Header.Get("Mcp-Method") != msg.Method {
			return false
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	stateless := false
	if v, ok := p.Meta[metaProtocolVersion]; ok {
		var mv string
		if json.Unmarshal(v, &mv) != nil || mv != header || mv != revStateless || !fastStatelessMeta(p.Meta) {
			return false
		}
		stateless = true
	}
	if header == revStateless && (!stateless || r.Header.Get("Mcp-Method") != msg.Method) {
		return false
	}
	var result any
	switch msg.Method {
	case "initialize":
		if stateless {
			return false
		}
		v := p.Version
		if !slices.Contains(legacyRevisions, v) {
			v = revLegacy
		}
		result = &initializeResult{ProtocolVersion: v, Capabilities: m.capabilities(run), ServerInfo: m.impl(), Instructions: instructions(run)}
	case "server/discover":
		if !stateless {
			return false
		}
		result = &discoverResult{TTLMs: 0, CacheScope: "private", SupportedVersions: sdk.SupportedProtocolVersions(),
			Capabilities: m.capabilities(run), Instructions: instructions(run)}
	case "ping":
		if stateless {
			return false
		}
		result = struct{}{}
	case "tools/list":
		if p.Cursor != nil {
			return false
		}
		a := m.attemptOf(run)
		if len(a.tools) > sdk.DefaultPageSize {
			return false
		}
		res := &sdk.ListToolsResult{Tools: a.tools}
		res.CacheScope = "private"
		result = res
	case "tools/call":
		if p.Name == nil || (stateless && r.Header.Get("Mcp-Name") != *p.Name) || !m.attemptOf(run).has(*p.Name) {
			return false
		}
		if len(p.Arguments) > 0 && string(p.Arguments) != "null" && p.Arguments[0] != '{' {
			return false
		}
		result = callTool(r.Context(), run, *p.Name, p.Arguments)
	default:
		return false
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return false
	}
	if stateless {
		raw = m.statelessResult(raw, m.impl())
	}
	out, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", msg.ID, raw})
	if err != nil {
		return false
	}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
	return true
}

// fastID reports whether id is a request's id the SDK takes as it is: a
// string or an integer, or none (a notification).
func fastID(id json.RawMessage) bool {
	if id == nil {
		return true
	}
	if id[0] == '"' {
		var s string
		return json.Unmarshal(id, &s) == nil
	}
	_, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil
}

// fastStatelessMeta reports whether the SDK takes a stateless request's
// _meta: client capabilities an object, client info, if any, an
// implementation.
func fastStatelessMeta(meta map[string]json.RawMessage) bool {
	caps, ok := meta[metaClientCapabilities]
	if !ok || len(caps) == 0 || caps[0] != '{' {
		return false
	}
	var c map[string]any
	if json.Unmarshal(caps, &c) != nil {
		return false
	}
	if info, ok := meta[metaClientInfo]; ok {
		var impl sdk.Implementation
		if len(info) == 0 || info[0] != '{' || json.Unmarshal(info, &impl) != nil {
			return false
		}
	}
	return true
}

// statelessResult is a result as the SDK answers a stateless request:
// complete, with the server's identity in its _meta.
func (m *mcpServer) statelessResult(raw []byte, impl *sdk.Implementation) []byte {
	info, _ := json.Marshal(impl)
	var b bytes.Buffer
	b.Grow(len(raw) + len(info) + 80)
	b.WriteString(`{"resultType":"complete","_meta":{"` + metaServerInfo + `":`)
	b.Write(info)
	b.WriteString(`}`)
	if rest := bytes.TrimSpace(raw[1:]); len(rest) > 0 && rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(raw[1:])
	return b.Bytes()
}
