package ratelimit

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/agentplane/agentplane/internal/problem"
)

// testRedisURL names the real Redis of the integration tests.
const testRedisURL = "AGENTPLANE_TEST_REDIS_URL"

// realRedis connects to the Redis named by AGENTPLANE_TEST_REDIS_URL, or
// skips the test. It returns a key prefix no other test uses and deletes
// the keys under it when the test ends.
func realRedis(t *testing.T) (url, prefix string) {
	t.Helper()
	url = os.Getenv(testRedisURL)
	if url == "" {
		t.Skipf("%s is not set: skipping the test against a real Redis (e.g. %s=redis://127.0.0.1:6379/0)", testRedisURL, testRedisURL)
	}
	prefix = fmt.Sprintf("agentplane-test:%s:%d:", t.Name(), time.Now().UnixNano())
	t.Cleanup(func() {
		client := connect(t, url)
		ctx := context.Background()
		// redis_rate puts "rate:" in front of every key.
		iter := client.Scan(ctx, 0, "rate:"+prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			if err := client.Del(ctx, iter.Val()).Err(); err != nil {
				t.Errorf("clean up %s: %v", iter.Val(), err)
			}
		}
		if err := iter.Err(); err != nil {
			t.Errorf("clean up keys under %s: %v", prefix, err)
		}
	})
	return url, prefix
}

// connect opens a client that is closed when the test ends.
func connect(t *testing.T, url string) *redis.Client {
	t.Helper()
	client, err := ConnectRedis(context.Background(), url)
	if err != nil {
		t.Fatalf("connect to redis: %v", err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func TestRedisTwoClientsShareOneQuota(t *testing.T) {
	url, prefix := realRedis(t)
	replicas := []*Redis{NewRedis(connect(t, url), prefix), NewRedis(connect(t, url), prefix)}

	var got []bool
	var remaining []int
	for i := range 6 {
		res, err := replicas[i%2].Allow(context.Background(), TenantKey("t1"), fivePerMinute)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		got = append(got, res.Allowed)
		remaining = append(remaining, res.Remaining)
		if !res.Allowed && res.RetryAfter <= 0 {
			t.Errorf("request %d refused with RetryAfter %s, want > 0", i+1, res.RetryAfter)
		}
		if res.Reset <= 0 || res.Reset > time.Minute {
			t.Errorf("request %d: Reset = %s, want in (0, 1m]", i+1, res.Reset)
		}
	}
	if diff := cmp.Diff([]bool{true, true, true, true, true, false}, got); diff != "" {
		t.Errorf("allowed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{4, 3, 2, 1, 0, 0}, remaining); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}

	// Another key has its own quota.
	res, err := replicas[0].Allow(context.Background(), TenantKey("t2"), fivePerMinute)
	if err != nil || !res.Allowed {
		t.Errorf("first request of another tenant = %+v, %v; want allowed", res, err)
	}
}

func TestRedisOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { client.Close() })
	l := NewRedis(client, "p:")

	got := allowN(t, l, "k", fivePerMinute, 6)

	var allowed []bool
	for _, r := range got {
		allowed = append(allowed, r.Allowed)
	}
	if diff := cmp.Diff([]bool{true, true, true, true, true, false}, allowed); diff != "" {
		t.Errorf("allowed (-want +got):\n%s", diff)
	}
	if last := got[5]; last.RetryAfter <= 0 || last.Limit != 5 || last.Remaining != 0 {
		t.Errorf("refusal = %+v, want Limit 5, Remaining 0, RetryAfter > 0", last)
	}
	if !mr.Exists("rate:p:k") {
		t.Errorf("keys in miniredis = %v, want rate:p:k", mr.Keys())
	}
}

func TestRedisDownIsUnavailable(t *testing.T) {
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { client.Close() })

	_, err = NewRedis(client, "p:").Allow(context.Background(), "k", fivePerMinute)

	if !problem.Is(err, problem.Unavailable) {
		t.Errorf("Allow with Redis down: err = %v, want code %s", err, problem.Unavailable)
	}
}

func TestConnectRedisKeepsThePasswordOutOfErrors(t *testing.T) {
	const secret = "s3cr3t-pa55"
	for _, raw := range []string{
		"redis://user:" + secret + "@127.0.0.1:1/0\x7f", // unparsable
		"http://user:" + secret + "@127.0.0.1:1/0",      // wrong scheme
		"redis://user:" + secret + "@127.0.0.1:1/0",     // nothing listening
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := ConnectRedis(ctx, raw)
		cancel()
		if err == nil {
			t.Errorf("ConnectRedis: got nil error")
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ConnectRedis error reveals the password: %v", err)
		}
	}
}
