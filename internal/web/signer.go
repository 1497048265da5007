package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// Kinds of signed page: a link signed for one kind is refused for another.
const (
	KindReplay = "replay"
	KindBatch  = "batch"
)

// Link lifetimes (SPEC §4 Replay: --viewer-ttl).
const (
	DefaultTTL = 24 * time.Hour
	MaxTTL     = 7 * 24 * time.Hour
)

// MinKeyLen is the shortest HMAC key NewSigner accepts.
const MinKeyLen = 32

// Causes of a refused link, wrapped in a problem.NotFound by Verify: logged, never sent.
var (
	ErrLinkInvalid = errors.New("viewer link missing a parameter or badly signed")
	ErrLinkExpired = errors.New("viewer link expired")
)

// Signer makes and checks the signed links of the viewer's pages, which
// carry no bearer token: the signature covers the page's kind and id, its
// expiry and the tools whose bodies it may show.
type Signer struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewSigner returns a Signer whose links live ttl (DefaultTTL when zero, at
// most MaxTTL). now is the clock, time.Now when nil.
func NewSigner(key []byte, ttl time.Duration, now func() time.Time) (*Signer, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("viewer key: %d bytes, want at least %d", len(key), MinKeyLen)
	}
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < time.Second:
		return nil, fmt.Errorf("viewer link ttl %s: must be at least a second", ttl)
	case ttl > MaxTTL:
		return nil, fmt.Errorf("viewer link ttl %s: must be at most %s", ttl, MaxTTL)
	}
	if now == nil {
		now = time.Now
	}
	return &Signer{key: slices.Clone(key), ttl: ttl, now: now}, nil
}

// ReplayURL returns the absolute signed URL of a replay's page under base
// (the public URL), showing the bodies of the given tools ("*" for all).
func (s *Signer) ReplayURL(base, replayID string, tools []string) string {
	return strings.TrimRight(base, "/") + ReplayPath(replayID) + "?" + s.Query(KindReplay, replayID, tools)
}

// BatchURL returns the absolute signed URL of a replay batch's report page
// under base, whose links to replays show the bodies of the given tools.
func (s *Signer) BatchURL(base, batchID string, tools []string) string {
	return strings.TrimRight(base, "/") + BatchPath(batchID) + "?" + s.Query(KindBatch, batchID, tools)
}

// ReplayPath and BatchPath are where the pages of a replay and a batch are
// served.
func ReplayPath(id string) string { return "/replays/" + url.PathEscape(id) }

// BatchPath: see ReplayPath.
func BatchPath(id string) string { return "/replay-batches/" + url.PathEscape(id) }

// Query returns the encoded query string (exp, tools, sig; no "?") that
// signs the page of the given kind and id for the given tools.
func (s *Signer) Query(kind, id string, tools []string) string {
	exp := strconv.FormatInt(s.now().Add(s.ttl).Unix(), 10)
	ts := NewTools(tools...).String()
	sig := hex.EncodeToString(s.mac(kind, id, exp, ts))
	// Tool names never need escaping; ',' and '*' are legal in a query.
	esc := strings.NewReplacer("%2C", ",", "%2A", "*").Replace(url.QueryEscape(ts))
	return "exp=" + exp + "&tools=" + esc + "&sig=" + sig
}

// Verify checks the signed query of the page of the given kind and id and
// returns the tools whose bodies the page may show. A missing parameter, a
// bad signature or an expired link is a problem.NotFound wrapping
// ErrLinkInvalid or ErrLinkExpired.
func (s *Signer) Verify(kind, id string, q url.Values) (Tools, error) {
	exps, tools, sigs := q["exp"], q["tools"], q["sig"]
	if kind == "" || id == "" || len(exps) != 1 || len(tools) != 1 || len(sigs) != 1 {
		return nil, refused(ErrLinkInvalid)
	}
	exp, err := strconv.ParseInt(exps[0], 10, 64)
	if err != nil {
		return nil, refused(ErrLinkInvalid)
	}
	sig, err := hex.DecodeString(sigs[0])
	if err != nil || !hmac.Equal(sig, s.mac(kind, id, exps[0], tools[0])) {
		return nil, refused(ErrLinkInvalid)
	}
	if !s.now().Before(time.Unix(exp, 0)) {
		return nil, refused(ErrLinkExpired)
	}
	return parseTools(tools[0]), nil
}

func refused(cause error) error {
	return problem.Wrap(problem.NotFound, cause, "no such page, or its link has expired")
}

// mac is the HMAC-SHA256 of a domain-separated message whose fields are
// length-prefixed, so no two (kind, id, exp, tools) share a message.
func (s *Signer) mac(kind, id, exp, tools string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("agentplane viewer link v1\n"))
	for _, f := range []string{kind, id, exp, tools} {
		m.Write(strconv.AppendInt(nil, int64(len(f)), 10))
		m.Write([]byte{':'})
		m.Write([]byte(f))
	}
	return m.Sum(nil)
}

// Tools says whose request and response bodies a page may show: the tools
// named, sorted and without duplicates, or every tool when it is ["*"].
type Tools []string

// AllTools shows every tool's bodies.
const AllTools = "*"

// NewTools returns the canonical Tools of the names: "*" among them means
// every tool; empty names and names with a comma (no tool's) are dropped.
func NewTools(names ...string) Tools {
	t := Tools{}
	for _, n := range names {
		if n == AllTools {
			return Tools{AllTools}
		}
		if n != "" && !strings.ContainsAny(n, ",*") {
			t = append(t, n)
		}
	}
	slices.Sort(t)
	return slices.Compact(t)
}

// ToolsFromScopes returns the tools a holder of the scopes may see the
// bodies of: tool:<name> for each name, tool:* for all.
func ToolsFromScopes(scopes []string) Tools {
	var names []string
	for _, s := range scopes {
		if n, ok := strings.CutPrefix(s, "tool:"); ok {
			names = append(names, n)
		}
	}
	return NewTools(names...)
}

// Shows reports whether the bodies of the named tool may be shown.
func (t Tools) Shows(name string) bool {
	return slices.Contains(t, AllTools) || slices.Contains(t, name)
}

// CanUseTool is Shows, so that t is a workflow.Reader: a signed page
// reads a workflow's history as the tools its link names allow.
func (t Tools) CanUseTool(name string) bool { return t.Shows(name) }

// String is the canonical form signed in a link: the names joined by commas.
func (t Tools) String() string { return strings.Join(t, ",") }

func parseTools(s string) Tools {
	if s == "" {
		return Tools{}
	}
	return NewTools(strings.Split(s, ",")...)
}
