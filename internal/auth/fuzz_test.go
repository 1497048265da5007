package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

// fuzzNow is the fuzz verifier's fixed clock, so checked-in tokens stay valid.
var fuzzNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fuzzClaims are the claims of the one valid token of the fuzz test. They are
// fixed, so the signed part (header.payload) of every valid token is the same
// and anything else the verifier accepts is a bug.
func fuzzClaims() map[string]any {
	return map[string]any{
		"iss": testIssuer, "aud": "agentplane", "sub": "fuzz", "client_id": "cli_fuzz",
		"iat": fuzzNow.Unix(), "nbf": fuzzNow.Unix(), "exp": fuzzNow.Add(time.Hour).Unix(),
		"jti": "fuzz", "scope": "tools:read tool:*", "tenant": "acme",
	}
}

// fuzzSetup returns a verifier whose store holds the test-only key of
// testdata/fuzz_signing_key.jwk, and the key.
func fuzzSetup(f testing.TB) (*EmbeddedVerifier, key) {
	f.Helper()
	jwk, err := os.ReadFile("testdata/fuzz_signing_key.jwk")
	if err != nil {
		f.Fatal(err)
	}
	sk := SigningKey{ID: "key_01M7Y7SG89M9Z9HEWE33AVY8F5", Algorithm: "ES256", PrivateJWK: jwk, CreatedAt: fuzzNow}
	st := newMemStore()
	st.keys = []SigningKey{sk}
	k, err := parseKey(sk)
	if err != nil {
		f.Fatal(err)
	}
	now := func() time.Time { return fuzzNow.Add(time.Minute) }
	return NewEmbeddedVerifier(st, Config{Issuer: testIssuer, Now: now}), k
}

// TestFuzzCorpusValidToken checks the checked-in valid seed is accepted, so
// the corpus exercises the accepting path too.
func TestFuzzCorpusValidToken(t *testing.T) {
	v, _ := fuzzSetup(t)
	b, err := os.ReadFile("testdata/fuzz/FuzzVerify/valid_token")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	raw, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[len(lines)-1], "string("), ")"))
	if err != nil {
		t.Fatalf("read seed: %v", err)
	}
	if _, err := v.Verify(context.Background(), raw); err != nil {
		t.Fatalf("checked-in valid token refused: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	v, k := fuzzSetup(f)
	valid := signClaims(f, k, "at+jwt", fuzzClaims())
	validSigned := valid[:strings.LastIndexByte(valid, '.')]
	if _, err := v.Verify(context.Background(), valid); err != nil {
		f.Fatalf("the valid seed is refused: %v", err)
	}
	f.Add(valid)
	f.Add(validSigned + ".")
	f.Add(valid[:len(valid)/2])
	f.Add(handMade(f, map[string]any{"alg": "none", "typ": "at+jwt", "kid": k.id}, fuzzClaims(), func(string) []byte { return nil }))
	pub, _ := k.public.MarshalJSON()
	f.Add(handMade(f, map[string]any{"alg": "HS256", "typ": "at+jwt", "kid": k.id}, fuzzClaims(), func(in string) []byte {
		m := hmac.New(sha256.New, pub)
		m.Write([]byte(in))
		return m.Sum(nil)
	}))
	f.Add("..")
	f.Add("Bearer " + valid)

	want := Principal{Subject: "fuzz", ClientID: "cli_fuzz", Tenant: "acme", Scopes: []string{"tools:read", "tool:*"}}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := v.Verify(context.Background(), raw)
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.Unauthenticated {
				t.Fatalf("error %v is not unauthenticated", err)
			}
			if len(raw) >= 16 && strings.Contains(err.Error(), raw) {
				t.Fatal("the error echoes the token")
			}
			return
		}
		if i := strings.LastIndexByte(raw, '.'); i < 0 || raw[:i] != validSigned {
			t.Fatalf("accepted a token whose signed part differs from the valid token's: %q", raw)
		}
		if diff := cmp.Diff(want, got, ignoreExpiry); diff != "" {
			t.Fatalf("principal (-want +got):\n%s", diff)
		}
	})
}
