package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/ids"
)

func TestTwoServersShareOneRedisQuota(t *testing.T) {
	redisURL := os.Getenv("AGENTPLANE_TEST_REDIS_URL")
	if redisURL == "" {
		t.Skip("AGENTPLANE_TEST_REDIS_URL not set: skipping the shared Redis rate limit test")
	}
	dir := t.TempDir()
	// Both servers name themselves alike so one token serves both.
	flags := []string{"--data", dir, "--public-url", "http://agentplane.test", "--redis-url", redisURL, "--rate-limit", "5"}
	a := startChild(t, freeAddr(t), flags...)
	b := startChild(t, freeAddr(t), flags...)

	tenant := strings.ToLower(ids.New("rl-")) // a fresh quota on a shared Redis
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", dir, "--public-url", "http://agentplane.test",
		"--tenant", tenant, "--scope", "audit:read"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	for i, srv := range []*child{a, b, a, b, a} {
		if code, body := srv.do("GET", "/v1/audit/verify", tok, nil); code != 200 {
			t.Fatalf("request %d: %d %v", i+1, code, body)
		}
	}
	if code, body := b.do("GET", "/v1/audit/verify", tok, nil); code != 429 || body["code"] != "rate-limited" {
		t.Fatalf("sixth request across both servers: %d %v", code, body)
	}
}
