package redact

import "context"

type ctxKey struct{}

// Scope is a masker with the detectors of what is under way (a tool's
// call, a completion), carried in a context to what reports on it: spans.
type Scope struct {
	m      *Masker
	detect []string
}

// Text masks s as Masker.Text does.
func (s *Scope) Text(v string) string {
	if s == nil {
		return v
	}
	return s.m.Text(v, s.detect)
}

// URL masks a URL as Masker.URL does.
func (s *Scope) URL(v string) string {
	if s == nil {
		return v
	}
	return s.m.URL(v, s.detect)
}

// NewContext carries m and detect in ctx; a nil m changes nothing.
func NewContext(ctx context.Context, m *Masker, detect []string) context.Context {
	if m == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, &Scope{m: m, detect: detect})
}

// ScopeOf returns the scope ctx carries, or nil (which masks nothing).
func ScopeOf(ctx context.Context) *Scope {
	s, _ := ctx.Value(ctxKey{}).(*Scope)
	return s
}

// TextIn masks s with the masker ctx carries; without one s is returned.
func TextIn(ctx context.Context, s string) string { return ScopeOf(ctx).Text(s) }

// URLIn masks a URL with the masker ctx carries; without one raw is
// returned.
func URLIn(ctx context.Context, raw string) string { return ScopeOf(ctx).URL(raw) }
