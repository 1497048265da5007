package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
)

// countingVerifier accepts "good-*" tokens, expiring at exp, and counts calls.
type countingVerifier struct {
	calls int
	exp   time.Time
}

func (v *countingVerifier) Verify(_ context.Context, raw string) (Principal, error) {
	v.calls++
	if raw[:5] != "good-" {
		return Principal{}, errors.New("bad token")
	}
	return Principal{Subject: raw, Tenant: "acme", ExpiresAt: v.exp}, nil
}

func TestCachingVerifier(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	next := &countingVerifier{exp: now.Add(90 * time.Second)}
	c := NewCachingVerifier(next, time.Minute, 4, func() time.Time { return now })
	ctx := context.Background()

	for range 3 {
		if p, err := c.Verify(ctx, "good-a"); err != nil || p.Subject != "good-a" {
			t.Fatalf("Verify = %+v, %v", p, err)
		}
	}
	if next.calls != 1 {
		t.Fatalf("verified %d times, want 1", next.calls)
	}
	for range 2 {
		if _, err := c.Verify(ctx, "bad-b"); err == nil {
			t.Fatal("a bad token was accepted")
		}
	}
	if next.calls != 3 {
		t.Fatalf("failures were cached: %d calls", next.calls)
	}
	now = now.Add(61 * time.Second) // past the cache ttl, before exp
	c.Verify(ctx, "good-a")
	if next.calls != 4 {
		t.Fatalf("entry outlived its ttl: %d calls", next.calls)
	}
	next.exp = now.Add(5 * time.Second) // a token expiring before the ttl
	c.Verify(ctx, "good-short")
	now = now.Add(6 * time.Second)
	c.Verify(ctx, "good-short")
	if next.calls != 6 {
		t.Fatalf("entry outlived its token: %d calls", next.calls)
	}
	for _, tok := range []string{"good-1", "good-2", "good-3", "good-4", "good-5", "good-6"} {
		c.Verify(ctx, tok)
	}
	if n := len(c.entries); n > 4 {
		t.Fatalf("cache holds %d entries, max 4", n)
	}
}

// ignoreExpiry compares principals without the token's expiry, which the
// tests that build an expected principal by hand do not know.
var ignoreExpiry = cmpopts.IgnoreFields(Principal{}, "ExpiresAt")
