package redact

import "context"

type ctxKey struct{}

type inContext struct {
	m      *Masker
	detect []string
}

// NewContext carries m and the detectors of what is under way (a tool's
// call, a completion) to what reports on it: spans and their attributes.
func NewContext(ctx context.Context, m *Masker, detect []string) context.Context {
	if m == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, inContext{m: m, detect: detect})
}

// TextIn masks s with the masker ctx carries; without one s is returned.
func TextIn(ctx context.Context, s string) string {
	c, ok := ctx.Value(ctxKey{}).(inContext)
	if !ok {
		return s
	}
	return c.m.Text(s, c.detect)
}

// InContext reports whether ctx carries a masker.
func InContext(ctx context.Context) bool {
	_, ok := ctx.Value(ctxKey{}).(inContext)
	return ok
}

// URLIn masks a URL with the masker ctx carries; without one raw is
// returned.
func URLIn(ctx context.Context, raw string) string {
	c, ok := ctx.Value(ctxKey{}).(inContext)
	if !ok {
		return raw
	}
	return c.m.URL(raw, c.detect)
}
