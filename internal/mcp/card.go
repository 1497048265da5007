package mcp

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/frontdoor"
)

// ServerCardSchema is the JSON Schema a server card names (SEP-2127,
// version 1).
const ServerCardSchema = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"

// cardMeta is the card's _meta key of what agentplane adds to it.
const cardMeta = "io.agentplane/server"

// ServerCard is an MCP Server Card (SEP-2127): who the server is and how
// to connect to it, read before connecting. It lists no tools: those depend
// on the caller's tenant and token, and tools/list answers them.
type ServerCard struct {
	Schema      string   `json:"$schema"`
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	WebsiteURL  string   `json:"websiteUrl,omitempty"`
	Remotes     []Remote `json:"remotes"`
	// Meta holds what the v1 schema has no field for, under the
	// publisher's key: the capabilities a client may count on.
	Meta map[string]any `json:"_meta,omitempty"`
}

// Remote is one endpoint of a server card.
type Remote struct {
	Type                      string   `json:"type"`
	URL                       string   `json:"url"`
	Headers                   []Header `json:"headers,omitempty"`
	SupportedProtocolVersions []string `json:"supportedProtocolVersions"`
}

// Header is a header a client sends to a remote.
type Header struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	IsRequired  bool   `json:"isRequired"`
	IsSecret    bool   `json:"isSecret"`
}

// Card is the server card of the tenants' MCP server at PublicURL/mcp.
func (s *Server) Card() ServerCard {
	return ServerCard{
		Schema: ServerCardSchema, Name: cardName(s.cfg.PublicURL), Version: cardVersion(s.cfg.Version),
		Title:       "agentplane",
		Description: "Search and call your registered API operations, and invoke your deployed agents.",
		Remotes: []Remote{{
			Type: "streamable-http", URL: s.cfg.PublicURL + "/mcp",
			Headers: []Header{{Name: "Authorization", IsRequired: true, IsSecret: true,
				Description: "Bearer access token with the scope " + auth.ScopeMCPUse + " (OAuth: " + s.ResourceMetadataURL() + ")"}},
			SupportedProtocolVersions: slices.Clone(sdk.SupportedProtocolVersions()),
		}},
		Meta: map[string]any{cardMeta: map[string]any{"capabilities": map[string]any{
			"extensions": map[string]any{extTasks: map[string]any{}},
			"tasks":      tasksCapability,
		}}},
	}
}

// HandleServerCard answers GET /.well-known/mcp/server-card.json.
func (s *Server) HandleServerCard(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	return frontdoor.WriteJSON(w, http.StatusOK, s.Card())
}

// cardName is the card's namespace/name: the public host's labels reversed
// (reverse DNS), then mcp.
func cardName(publicURL string) string {
	host := "localhost"
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	labels := strings.FieldsFunc(host, func(r rune) bool { return r == '.' || r == ':' || r == '[' || r == ']' })
	slices.Reverse(labels)
	ns := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, strings.Join(labels, "."))
	return ns + "/mcp"
}

// cardVersion is the server's version as a card states it: exact, never a
// range; a build without one is 0.0.0-dev.
func cardVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	if v == "" || strings.ContainsAny(v, "^~|<> *") {
		return "0.0.0-dev"
	}
	return v
}
