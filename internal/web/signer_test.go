package web

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestSigner(t *testing.T, ttl time.Duration) (*Signer, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s, err := NewSigner(testKey, ttl, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestNewSigner(t *testing.T) {
	tests := []struct {
		name    string
		key     []byte
		ttl     time.Duration
		wantErr bool
	}{
		{"default ttl", testKey, 0, false},
		{"one hour", testKey, time.Hour, false},
		{"seven days", testKey, MaxTTL, false},
		{"over seven days", testKey, MaxTTL + time.Second, true},
		{"negative ttl", testKey, -time.Hour, true},
		{"short key", testKey[:16], time.Hour, true},
		{"no key", nil, time.Hour, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSigner(tc.key, tc.ttl, nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("NewSigner(%d-byte key, %s) error = %v, want error %v", len(tc.key), tc.ttl, err, tc.wantErr)
			}
		})
	}
}

func TestReplayURL(t *testing.T) {
	s, c := newTestSigner(t, 0)
	got := s.ReplayURL("https://agentplane.example/", "rpl_01", []string{"payments", "orders", "orders", ""})
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "https" || u.Host != "agentplane.example" || u.Path != "/replays/rpl_01" {
		t.Errorf("ReplayURL = %s, want https://agentplane.example/replays/rpl_01?…", got)
	}
	if want := "exp=1772452800&tools=orders,payments&sig="; !strings.HasPrefix(u.RawQuery, want) {
		t.Errorf("query = %s, want prefix %s (24 h after %s)", u.RawQuery, want, c.t)
	}
	all := s.ReplayURL("http://127.0.0.1:8080", "rpl_01", []string{"orders", "*"})
	if !strings.Contains(all, "&tools=*&") {
		t.Errorf("ReplayURL with * = %s, want tools=*", all)
	}
}

func TestVerify(t *testing.T) {
	s, c := newTestSigner(t, time.Hour)
	signed := func(tools ...string) url.Values {
		q, err := url.ParseQuery(s.Query(KindReplay, "rpl_01", tools))
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	tests := []struct {
		name    string
		kind    string
		id      string
		q       url.Values
		want    Tools
		wantErr error
	}{
		{name: "round trip", kind: KindReplay, id: "rpl_01", q: signed("orders", "payments"), want: Tools{"orders", "payments"}},
		{name: "no tools", kind: KindReplay, id: "rpl_01", q: signed(), want: Tools{}},
		{name: "all tools", kind: KindReplay, id: "rpl_01", q: signed("*"), want: Tools{"*"}},
		{name: "other id", kind: KindReplay, id: "rpl_02", q: signed("orders"), wantErr: ErrLinkInvalid},
		{name: "other kind", kind: KindBatch, id: "rpl_01", q: signed("orders"), wantErr: ErrLinkInvalid},
		{name: "more tools", kind: KindReplay, id: "rpl_01", q: with(signed("orders"), "tools", "orders,payments"), wantErr: ErrLinkInvalid},
		{name: "all tools claimed", kind: KindReplay, id: "rpl_01", q: with(signed("orders"), "tools", "*"), wantErr: ErrLinkInvalid},
		{name: "later exp", kind: KindReplay, id: "rpl_01", q: with(signed("orders"), "exp", "1772452800"), wantErr: ErrLinkInvalid},
		{name: "exp with a leading zero", kind: KindReplay, id: "rpl_01", q: with(signed("orders"), "exp", "0"+signed("orders").Get("exp")), wantErr: ErrLinkInvalid},
		{name: "flipped sig", kind: KindReplay, id: "rpl_01", q: with(signed("orders"), "sig", flip(signed("orders").Get("sig"))), wantErr: ErrLinkInvalid},
		{name: "short sig", kind: KindReplay, id: "rpl_01", q: with(signed("orders"), "sig", signed("orders").Get("sig")[:32]), wantErr: ErrLinkInvalid},
		{name: "sig not hex", kind: KindReplay, id: "rpl_01", q: with(signed("orders"), "sig", "zz"), wantErr: ErrLinkInvalid},
		{name: "no sig", kind: KindReplay, id: "rpl_01", q: without(signed("orders"), "sig"), wantErr: ErrLinkInvalid},
		{name: "no exp", kind: KindReplay, id: "rpl_01", q: without(signed("orders"), "exp"), wantErr: ErrLinkInvalid},
		{name: "no tools parameter", kind: KindReplay, id: "rpl_01", q: without(signed(), "tools"), wantErr: ErrLinkInvalid},
		{name: "two sigs", kind: KindReplay, id: "rpl_01", q: twice(signed("orders"), "sig"), wantErr: ErrLinkInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Verify(tc.kind, tc.id, tc.q)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if !problem.Is(err, problem.NotFound) {
					t.Errorf("Verify error = %v, want a problem.NotFound", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Verify tools (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("expired", func(t *testing.T) {
		q := signed("orders")
		c.t = c.t.Add(time.Hour - time.Second)
		if _, err := s.Verify(KindReplay, "rpl_01", q); err != nil {
			t.Fatalf("a second before expiry: %v", err)
		}
		c.t = c.t.Add(time.Second)
		if _, err := s.Verify(KindReplay, "rpl_01", q); !errors.Is(err, ErrLinkExpired) {
			t.Fatalf("at expiry: error = %v, want %v", err, ErrLinkExpired)
		}
	})

	t.Run("other key", func(t *testing.T) {
		other, err := NewSigner([]byte("fedcba9876543210fedcba9876543210"), time.Hour, c.now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Verify(KindReplay, "rpl_01", signed("orders")); !errors.Is(err, ErrLinkInvalid) {
			t.Fatalf("error = %v, want %v", err, ErrLinkInvalid)
		}
	})
}

func TestTools(t *testing.T) {
	tests := []struct {
		name   string
		tools  Tools
		shows  []string
		hides  []string
		string string
	}{
		{"named", NewTools("payments", "orders"), []string{"orders", "payments"}, []string{"risk", "*", ""}, "orders,payments"},
		{"all", NewTools("orders", "*"), []string{"orders", "risk"}, nil, "*"},
		{"none", NewTools(), nil, []string{"orders"}, ""},
		{"from scopes", ToolsFromScopes([]string{"workflows:replay", "tool:risk", "tool:orders", "tools:read"}), []string{"orders", "risk"}, []string{"tools:read", "read"}, "orders,risk"},
		{"from tool:*", ToolsFromScopes([]string{"tool:*"}), []string{"anything"}, nil, "*"},
		{"comma dropped", NewTools("a,b", "c"), []string{"c"}, []string{"a", "b", "a,b"}, "c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range tc.shows {
				if !tc.tools.Shows(n) {
					t.Errorf("%v.Shows(%q) = false, want true", tc.tools, n)
				}
			}
			for _, n := range tc.hides {
				if tc.tools.Shows(n) {
					t.Errorf("%v.Shows(%q) = true, want false", tc.tools, n)
				}
			}
			if got := tc.tools.String(); got != tc.string {
				t.Errorf("String() = %q, want %q", got, tc.string)
			}
		})
	}
}

func with(q url.Values, k, v string) url.Values {
	q.Set(k, v)
	return q
}

func without(q url.Values, k string) url.Values {
	q.Del(k)
	return q
}

func twice(q url.Values, k string) url.Values {
	q.Add(k, q.Get(k))
	return q
}

// flip changes the last hex digit of a signature.
func flip(sig string) string {
	last := sig[len(sig)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return sig[:len(sig)-1] + string(repl)
}
