package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServerCard fetches the server card without a token, checks it
// against the v1 schema's rules (name namespace/name, exact version,
// description of 1 to 100 characters), then connects the SDK's client to
// the remote the card names, with the header it asks for, and lists the
// tools.
func TestMCPServerCard(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do("GET", "/.well-known/mcp/server-card.json", "", nil)
	var card struct {
		Schema      string `json:"$schema"`
		Name        string `json:"name"`
		Version     string `json:"version"`
		Description string `json:"description"`
		Remotes     []struct {
			Type     string   `json:"type"`
			URL      string   `json:"url"`
			Versions []string `json:"supportedProtocolVersions"`
			Headers  []struct {
				Name                 string
				IsRequired, IsSecret bool
			} `json:"headers"`
		} `json:"remotes"`
	}
	r.json(t, &card)
	if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("card: %d %v %s", r.Status, r.Header, r.Body)
	}
	host, _ := url.Parse(h.URL)
	if card.Schema != "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json" ||
		!regexp.MustCompile(`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`).MatchString(card.Name) || card.Name != "1.0.0.127/mcp" && host.Hostname() == "127.0.0.1" ||
		regexp.MustCompile(`[\^~|<>*\s]`).MatchString(card.Version) || card.Version == "" ||
		len(card.Description) < 1 || len(card.Description) > 100 || len(card.Remotes) != 1 {
		t.Fatalf("card: %s", r.Body)
	}
	remote := card.Remotes[0]
	if remote.Type != "streamable-http" || remote.URL != h.URL+"/mcp" || !slices.Contains(remote.Versions, "2026-07-28") ||
		!slices.Contains(remote.Versions, "2025-11-25") || len(remote.Headers) != 1 || remote.Headers[0].Name != "Authorization" ||
		!remote.Headers[0].IsRequired || !remote.Headers[0].IsSecret {
		t.Fatalf("remote: %+v", remote)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "card-reader", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             remote.URL,
		HTTPClient:           &http.Client{Transport: bearer{h.token("acme", "mcp:use"), http.DefaultTransport}},
		DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect to the card's remote: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 2 {
		t.Errorf("tools of the card's remote: %+v %v", tools, err)
	}
}
