package outbound

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/problem"
)

// TestAllowedHost shows --allow-private-host opens one private host and
// port, checked on the address dialled, while another server on the same
// machine stays refused.
func TestAllowedHost(t *testing.T) {
	answer := func(body string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }))
		t.Cleanup(srv.Close)
		return srv
	}
	allowed, other := answer("allowed"), answer("other")
	port := func(srv *httptest.Server) string { u, _ := url.Parse(srv.URL); return u.Port() }
	byName := func(srv *httptest.Server) string { return "http://localhost:" + port(srv) }

	tests := []struct {
		name  string
		allow string
		url   string
		want  string // the body, or "" when refused
	}{
		{"address and port", "127.0.0.1:" + port(allowed), allowed.URL, "allowed"},
		{"same address, another port", "127.0.0.1:" + port(allowed), other.URL, ""},
		{"address, every port", "127.0.0.1", other.URL, "other"},
		{"another address", "127.0.0.2", allowed.URL, ""},
		{"host name and port", "localhost:" + port(allowed), byName(allowed), "allowed"},
		{"host name, another port", "localhost:" + port(allowed), byName(other), ""},
		{"host name, not its address", "localhost", allowed.URL, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAllowedHost(tc.allow)
			if err != nil {
				t.Fatal(err)
			}
			c := New(Options{AllowHosts: []AllowedHost{a}})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, tc.url, nil)
			resp, err := c.HTTPClient().Do(req)
			if tc.want == "" {
				if !problem.Is(err, problem.URLNotAllowed) {
					t.Fatalf("GET %s: err = %v, want url-not-allowed", tc.url, err)
				}
				if err := c.CheckHost(t.Context(), tc.url); !problem.Is(err, problem.URLNotAllowed) {
					t.Errorf("CheckHost(%s) = %v, want url-not-allowed", tc.url, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("GET %s: %v", tc.url, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if string(body) != tc.want {
				t.Errorf("body = %q, want %q", body, tc.want)
			}
			if err := c.CheckHost(t.Context(), tc.url); err != nil {
				t.Errorf("CheckHost(%s) = %v, want nil", tc.url, err)
			}
		})
	}
}

func TestCheckHostResolves(t *testing.T) {
	c := New(Options{})
	err := c.CheckHost(context.Background(), "http://localhost:11434/v1")
	if !problem.Is(err, problem.URLNotAllowed) {
		t.Fatalf("CheckHost(localhost) = %v, want url-not-allowed", err)
	}
	if err := c.CheckHost(context.Background(), "https://no-such-host.invalid/v1"); err != nil {
		t.Errorf("a name that does not resolve now is checked when dialled: %v", err)
	}
}

// resolver answers every name with its addresses.
type resolver []netip.Addr

func (r resolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) { return r, nil }

// TestARefusedNameKeepsItsAddress: a host name resolving to a private
// address is refused, at registration and when dialled, with a detail
// that names the host and the flags that allow it, never the address.
func TestARefusedNameKeepsItsAddress(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	for _, tc := range []struct {
		name string
		err  func(c *Client) error
	}{
		{"registration", func(c *Client) error {
			return c.CheckHost(t.Context(), "https://hooks.example.test/agentplane")
		}},
		{"dial", func(c *Client) error {
			_, _, err := c.Fetch(t.Context(), "http://localhost:"+u.Port()+"/openapi.json")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{Resolver: resolver{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("127.0.0.1")}})
			err := tc.err(c)
			if !problem.Is(err, problem.URLNotAllowed) {
				t.Fatalf("err = %v, want url-not-allowed", err)
			}
			d := problem.As(err).Detail
			for _, want := range []string{"resolves to a private address", "--allow-private-host", "--allow-private-networks"} {
				if !strings.Contains(d, want) {
					t.Errorf("detail %q does not say %q", d, want)
				}
			}
			for _, leak := range []string{"127.0.0.1", "10.1.2.3", "::1", "loopback"} {
				if strings.Contains(d, leak) {
					t.Errorf("detail %q reveals %q", d, leak)
				}
			}
			if r := Reason(fmt.Errorf("send: %w", err), 0); r != d {
				t.Errorf("Reason = %q, want the detail %q", r, d)
			}
		})
	}
	if err := New(Options{Resolver: resolver{netip.MustParseAddr("93.184.215.14")}}).CheckHost(t.Context(), "https://hooks.example.test/"); err != nil {
		t.Errorf("a name resolving to a public address: %v", err)
	}
}

func TestParseAllowedHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:11434", "127.0.0.1:11434"},
		{"[::1]:8000", "[::1]:8000"},
		{"[::1]", "::1"},
		{"Ollama.Internal.", "ollama.internal"},
		{"localhost:4000", "localhost:4000"},
		{"::ffff:10.0.0.1", "10.0.0.1"},
	}
	for _, tc := range tests {
		a, err := ParseAllowedHost(tc.in)
		if err != nil || a.String() != tc.want {
			t.Errorf("ParseAllowedHost(%q) = %q, %v; want %q", tc.in, a, err, tc.want)
		}
	}
	for _, bad := range []string{"", ":80", "127.0.0.1:0", "host:http", "0x7f.1", "a/b"} {
		if _, err := ParseAllowedHost(bad); err == nil {
			t.Errorf("ParseAllowedHost(%q) accepted", bad)
		}
	}
}

func TestIsAllowedHost(t *testing.T) {
	var hosts []AllowedHost
	for _, s := range []string{"127.0.0.1:9000", "hooks.internal"} {
		a, err := ParseAllowedHost(s)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, a)
	}
	c := New(Options{AllowHosts: hosts})
	for raw, want := range map[string]bool{
		"http://127.0.0.1:9000/hooks": true, "http://127.0.0.1:9001/hooks": false, "http://127.0.0.2:9000/": false,
		"http://hooks.internal/x": true, "https://HOOKS.internal:8443/x": true, "http://other.internal/": false, "::": false,
	} {
		if got := c.IsAllowedHost(raw); got != want {
			t.Errorf("IsAllowedHost(%q) = %v, want %v", raw, got, want)
		}
	}
}
