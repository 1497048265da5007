// Package redact masks what must not be kept: values a tool's redaction
// names by JSON pointer or header, and values found by detectors (e-mail
// addresses, payment cards, IBANs, phone numbers, IP addresses). A masked
// value becomes "[redacted:<kind>:<8 hex>]", the hex a keyed HMAC-SHA256
// of the value under the tenant's own key, so equal values stay equal
// (replay matching and diffs work on the masked forms) without being kept.
package redact

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Detector kinds.
const (
	Email       = "email"
	PaymentCard = "payment_card"
	IBAN        = "iban"
	Phone       = "phone"
	IPAddress   = "ip_address"
)

// Kinds of a masked value that no detector found.
const (
	// Field is a value a JSON pointer of the tool's redaction names.
	Field = "field"
	// Header is a value of a header the tool's redaction names.
	Header = "header"
	// URLPart is a path segment or query value of a URL masked whole, as
	// every one is once a workflow has masked more values than it
	// remembers.
	URLPart = "url"
)

// Detectors are the known detectors, in the order they are applied.
var Detectors = []string{Email, IBAN, PaymentCard, Phone, IPAddress}

// Bounds of a redaction.
const (
	maxFields  = 100
	maxHeaders = 100
	// maxKnown bounds the values a masker remembers to mask later.
	maxKnown = 1000
	// minKnown is the shortest value replaced wherever it appears in text:
	// shorter ones ("ok", "1") would mask unrelated text, and are masked
	// later only as a whole path segment or query value of a URL.
	minKnown = 4
)

// Config is a tool's redaction: what of its calls is masked before
// anything is stored or sent on.
type Config struct {
	// Fields are JSON pointers (RFC 6901) rooted at /arguments,
	// /request/body or /response/body; a reference token "*" stands for
	// every member or element.
	Fields []string `json:"fields,omitempty"`
	// Headers are header names of the recorded request, in any case.
	Headers []string `json:"headers,omitempty"`
	// Detect names detectors run over every string of the call.
	Detect []string `json:"detect,omitempty"`
}

// IsZero reports whether c masks nothing.
func (c *Config) IsZero() bool {
	return c == nil || len(c.Fields) == 0 && len(c.Headers) == 0 && len(c.Detect) == 0
}

// Validate appends what is wrong with c to add, fields under prefix.
func (c *Config) Validate(prefix string, add func(field, format string, args ...any)) {
	if c == nil {
		return
	}
	if len(c.Fields) > maxFields {
		add(prefix+".fields", "names %d pointers, over the limit of %d", len(c.Fields), maxFields)
	}
	for i, p := range c.Fields {
		if _, _, err := parseField(p); err != nil {
			add(fmt.Sprintf("%s.fields[%d]", prefix, i), "%s", err)
		}
	}
	if len(c.Headers) > maxHeaders {
		add(prefix+".headers", "names %d headers, over the limit of %d", len(c.Headers), maxHeaders)
	}
	for i, h := range c.Headers {
		if !validHeaderName(h) {
			add(fmt.Sprintf("%s.headers[%d]", prefix, i), "must be an HTTP header name such as X-Customer-Email, not %q", h)
		}
	}
	for i, d := range c.Detect {
		if !slices.Contains(Detectors, d) {
			add(fmt.Sprintf("%s.detect[%d]", prefix, i), "unknown detector %q: the known ones are %s", d, strings.Join(Detectors, ", "))
		}
	}
}

// ParseDetectors reads a comma-separated list of detectors (the
// --redact-detect flag); "" is none.
func ParseDetectors(list string) ([]string, error) {
	var out []string
	for d := range strings.SplitSeq(list, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		if !slices.Contains(Detectors, d) {
			return nil, fmt.Errorf("unknown detector %q: the known ones are %s", d, strings.Join(Detectors, ", "))
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

func validHeaderName(h string) bool {
	if h == "" || len(h) > 256 {
		return false
	}
	for _, r := range h {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// KeyStore keeps one redaction key per tenant.
type KeyStore interface {
	// RedactionKey returns the tenant's key, storing fresh as the key
	// first when the tenant has none (concurrent callers all get the one
	// stored).
	RedactionKey(ctx context.Context, tenant string, fresh []byte) ([]byte, error)
}

// Service makes maskers with each tenant's key and the operator's
// detectors.
type Service struct {
	Keys KeyStore
	// Detect are the operator's detectors (--redact-detect), run for every
	// tool.
	Detect []string

	mu   sync.Mutex
	keys map[string][]byte
}

// Masker returns a masker for one tenant. A nil Service returns a nil
// Masker, which masks nothing.
func (s *Service) Masker(ctx context.Context, tenant string) (*Masker, error) {
	if s == nil {
		return nil, nil
	}
	key, err := s.key(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return &Masker{key: key, base: s.Detect, known: map[string]string{}}, nil
}

func (s *Service) key(ctx context.Context, tenant string) ([]byte, error) {
	s.mu.Lock()
	key, ok := s.keys[tenant]
	s.mu.Unlock()
	if ok {
		return key, nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("redaction key: %w", err)
	}
	key, err := s.Keys.RedactionKey(ctx, tenant, fresh)
	if err != nil {
		return nil, fmt.Errorf("redaction key of tenant %s: %w", tenant, err)
	}
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[string][]byte{}
	}
	s.keys[tenant] = key
	s.mu.Unlock()
	return key, nil
}

// Masker masks the values of one tenant's workflow. It remembers the
// values it masked by field or header, to mask them wherever they appear
// later (a URL's path, the model's conversation, the output). A nil
// Masker masks nothing. It is safe for concurrent use.
type Masker struct {
	mu   sync.Mutex
	key  []byte
	base []string
	// known are the values remembered that are masked wherever they
	// appear in text; short those too short for that, masked as a whole
	// path segment or query value of a URL.
	known, short map[string]string
	// order is known's values, longest first.
	order []string
	// full says a value masked was not remembered: every URL is then
	// masked whole, path segments and query values.
	full bool
	// masked counts the values masked so far.
	masked int
}

// Token is the replacement of value as a kind: [redacted:<kind>:<8 hex>].
func (m *Masker) Token(kind, value string) string {
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(value))
	return "[redacted:" + kind + ":" + hex.EncodeToString(mac.Sum(nil)[:4]) + "]"
}

// Detectors are the operator's detectors and extra, without repeats.
func (m *Masker) Detectors(extra ...[]string) []string {
	if m == nil {
		return nil
	}
	out := slices.Clone(m.base)
	for _, list := range extra {
		for _, d := range list {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

func (m *Masker) nothingKnown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.known) == 0
}

// remember has value masked as token wherever it appears in text later
// (a short value: as a whole path segment or query value of a URL).
func (m *Masker) remember(value, token string) {
	if value == "" {
		return
	}
	_, isKnown := m.known[value]
	_, isShort := m.short[value]
	switch {
	case isKnown || isShort:
		return
	case len(m.known)+len(m.short) >= maxKnown:
		m.full = true
		return
	case len([]rune(value)) < minKnown:
		if m.short == nil {
			m.short = map[string]string{}
		}
		m.short[value] = token
		return
	}
	m.known[value] = token
	i, _ := slices.BinarySearchFunc(m.order, value, func(a, b string) int { return len(b) - len(a) })
	m.order = slices.Insert(m.order, i, value)
}

// Text masks the values remembered and what the detectors find in s;
// tokens already in s are left as they are, so masking twice changes
// nothing.
func (m *Masker) Text(s string, detect []string) string {
	if m == nil || s == "" {
		return s
	}
	if len(detect) == 0 && m.nothingKnown() {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.text(s, detect)
}

func (m *Masker) text(s string, detect []string) string {
	locs := tokenRE.FindAllStringIndex(s, -1)
	if locs == nil {
		return m.plain(s, detect)
	}
	var b strings.Builder
	at := 0
	for _, l := range locs {
		b.WriteString(m.plain(s[at:l[0]], detect))
		b.WriteString(s[l[0]:l[1]])
		at = l[1]
	}
	b.WriteString(m.plain(s[at:], detect))
	return b.String()
}

// plain masks a text holding no token.
func (m *Masker) plain(s string, detect []string) string {
	if s == "" {
		return s
	}
	for _, v := range m.order {
		if n := strings.Count(s, v); n > 0 {
			s = strings.ReplaceAll(s, v, m.known[v])
			m.masked += n
		}
	}
	for _, d := range Detectors {
		if slices.Contains(detect, d) {
			s = m.detect(d, s)
		}
	}
	return s
}

// Headers masks the values of the named headers, and what the detectors
// find in the others, in place.
func (m *Masker) Headers(h map[string][]string, names, detect []string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, vals := range h {
		named := slices.ContainsFunc(names, func(n string) bool { return http.CanonicalHeaderKey(n) == http.CanonicalHeaderKey(name) })
		for i, v := range vals {
			if named {
				tok := m.Token(Header, v)
				m.remember(v, tok)
				vals[i] = tok
				m.masked++
			} else {
				vals[i] = m.text(v, detect)
			}
		}
	}
}

// URL masks a URL's path segments and query values, each unescaped
// first (an e-mail address in a query is sent as jane%40example.com), and
// drops its user information; what does not parse is masked as text.
// Once a value masked could not be remembered, every path segment and
// query value is masked whole rather than risk keeping it.
func (m *Masker) URL(raw string, detect []string) string {
	if m == nil || raw == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return m.Text(raw, detect)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	before := m.masked
	segs := strings.Split(u.Path, "/")
	for i := range segs {
		segs[i] = m.urlPart(segs[i], detect)
	}
	q := u.Query()
	for _, vs := range q {
		for i := range vs {
			vs[i] = m.urlPart(vs[i], detect)
		}
	}
	frag := m.text(u.Fragment, detect)
	if m.masked == before && u.User == nil {
		return raw
	}
	u.User = nil
	u.Path, u.RawPath, u.Fragment, u.RawFragment = strings.Join(segs, "/"), "", frag, ""
	if u.RawQuery != "" {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// urlPart masks a path segment or query value: whole when it is a short
// value remembered or when the remembered values are full, else as text.
func (m *Masker) urlPart(s string, detect []string) string {
	if s == "" || tokenRE.FindString(s) == s {
		return s
	}
	if tok, ok := m.short[s]; ok {
		m.masked++
		return tok
	}
	if tok, ok := m.known[s]; ok && m.full {
		m.masked++
		return tok
	}
	if m.full {
		m.masked++
		return m.Token(URLPart, s)
	}
	return m.text(s, detect)
}
