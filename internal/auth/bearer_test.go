package auth

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		want    string
		ok      bool
	}{
		{"bearer", []string{"Bearer abc.def.ghi"}, "abc.def.ghi", true},
		{"lower-case scheme", []string{"bearer abc.def.ghi"}, "abc.def.ghi", true},
		{"upper-case scheme", []string{"BEARER abc"}, "abc", true},
		{"b64token padding", []string{"Bearer a+b/c~d=="}, "a+b/c~d==", true},
		{"no header", nil, "", false},
		{"basic", []string{"Basic dXNlcjpwYXNz"}, "", false},
		{"no token", []string{"Bearer"}, "", false},
		{"empty token", []string{"Bearer "}, "", false},
		{"token with a space", []string{"Bearer abc def"}, "", false},
		{"only padding", []string{"Bearer =="}, "", false},
		{"two headers", []string{"Bearer a", "Bearer b"}, "", false},
		{"scheme without space", []string{"Bearerabc"}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/tools", nil)
			for _, h := range tc.headers {
				r.Header.Add("Authorization", h)
			}
			got, ok := BearerToken(r)
			if got != tc.want || ok != tc.ok {
				t.Errorf("BearerToken = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestChallenge(t *testing.T) {
	scopeErr := Principal{Scopes: []string{"tools:read"}}.Require("tools:write")
	tests := []struct {
		name  string
		err   error
		scope string
		want  string
	}{
		{"no token", nil, "", `Bearer error="invalid_token"`},
		{"bad token", problem.New(problem.Unauthenticated, "token expired"), "", `Bearer error="invalid_token"`},
		{"missing scope from the error", scopeErr, "", `Bearer error="insufficient_scope", scope="tools:write"`},
		{"missing scope given", fmt.Errorf("route: %w", scopeErr), "audit:read", `Bearer error="insufficient_scope", scope="audit:read"`},
		{"scope that cannot be quoted", scopeErr, `a"b`, `Bearer error="insufficient_scope"`},
		{"other error", errors.New("boom"), "tools:read", `Bearer error="invalid_token"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Challenge(tc.err, tc.scope)); diff != "" {
				t.Errorf("Challenge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequire(t *testing.T) {
	p := Principal{Scopes: []string{"tools:read"}}
	if err := p.Require("tools:read"); err != nil {
		t.Errorf("Require(held scope) = %v", err)
	}
	var pe *problem.Error
	if err := p.Require("tools:write"); !errors.As(err, &pe) || pe.Code != problem.InsufficientScope || pe.Scope != "tools:write" {
		t.Errorf("Require(missing scope) = %v, want insufficient-scope naming tools:write", err)
	}
}
