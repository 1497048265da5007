package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/agentplane/agentplane/internal/problem"
)

// Redis is a Limiter whose quotas live in Redis, shared by every replica that
// uses the same Redis and prefix. It runs redis_rate's GCRA script, which is
// atomic in Redis; keys expire once their quota is whole again.
type Redis struct {
	limiter *redis_rate.Limiter
	prefix  string
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a Limiter on client (a *redis.Client, or a cluster or
// ring client). prefix namespaces the keys, e.g. "agentplane:"; redis_rate
// adds its own "rate:" in front. The caller owns and closes client.
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	return &Redis{limiter: redis_rate.NewLimiter(client), prefix: prefix}
}

// Allow takes one request from key's quota in Redis. When Redis cannot answer
// the error is a *problem.Error of code unavailable wrapping the cause; it is
// not a refusal, and the HTTP layer answers 503.
func (r *Redis) Allow(ctx context.Context, key string, l Limit) (Result, error) {
	l = l.normalize()
	if err := l.validate(); err != nil {
		return Result{}, err
	}
	res, err := r.limiter.Allow(ctx, r.prefix+key, redis_rate.Limit{Rate: l.Rate, Burst: l.Burst, Period: l.Period})
	if err != nil {
		return Result{}, problem.Wrap(problem.Unavailable, fmt.Errorf("rate limit in redis: %w", err), "the rate limiter is unavailable")
	}
	out := Result{
		Allowed:   res.Allowed > 0,
		Limit:     l.Burst,
		Remaining: max(res.Remaining, 0),
		Reset:     max(res.ResetAfter, 0),
	}
	if !out.Allowed {
		// redis_rate reports -1 when allowed; a refusal always has a wait.
		out.RetryAfter = max(res.RetryAfter, 1)
	}
	return out, nil
}

// ConnectRedis parses a redis:// (or rediss://, unix://) URL, connects and
// pings. Errors never repeat the URL, which may hold a password.
func ConnectRedis(ctx context.Context, rawURL string) (*redis.Client, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("ping redis at %s: %w", opts.Addr, err)
	}
	return client, nil
}
