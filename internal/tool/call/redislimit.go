package call

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// DefaultSlotLease is how long a concurrency slot in Redis outlives its
// holder's last renewal: a replica that dies mid-call frees its slots
// within it.
const DefaultSlotLease = 10 * time.Second

// RedisLimiter shares tools' limits across every replica on one Redis:
// rates by GCRA (redis_rate, as the tenant limits), concurrency by a
// semaphore of expiring slots: a sorted set of holders scored by the
// time their lease ends, renewed while the call runs.
type RedisLimiter struct {
	client redis.UniversalClient
	rates  *redis_rate.Limiter
	prefix string
	lease  time.Duration
}

var _ Limiter = (*RedisLimiter)(nil)

// NewRedisLimiter returns a Limiter on client; prefix namespaces its keys
// (e.g. "agentplane:"); lease 0 is DefaultSlotLease. The caller owns client.
func NewRedisLimiter(client redis.UniversalClient, prefix string, lease time.Duration) *RedisLimiter {
	if lease <= 0 {
		lease = DefaultSlotLease
	}
	return &RedisLimiter{client: client, rates: redis_rate.NewLimiter(client), prefix: prefix, lease: lease}
}

// Wait implements Limiter: a burst of one spaces the replicas' calls evenly.
func (r *RedisLimiter) Wait(ctx context.Context, key string, n int, per time.Duration) error {
	for {
		res, err := r.rates.Allow(ctx, r.prefix+"tool:"+key, redis_rate.Limit{Rate: n, Burst: 1, Period: per})
		if err != nil {
			if ctx.Err() != nil {
				return errNoTurn
			}
			return fmt.Errorf("tool rate limit in redis: %w", err)
		}
		if res.Allowed > 0 {
			return nil
		}
		wait := max(res.RetryAfter, time.Millisecond)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return errNoTurn
		}
		if sleep(ctx, wait) != nil {
			return errNoTurn
		}
	}
}

// acquireSlot drops expired holders and adds ARGV[1] with a lease of
// ARGV[3] ms when fewer than ARGV[2] hold a slot. Redis's own clock scores
// the leases, so replicas' clocks need not agree.
var acquireSlot = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0`)

// renewSlot extends ARGV[1]'s lease to ARGV[2] ms from now, if it still holds one.
var renewSlot = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0`)

// Acquire implements Limiter, polling for a free slot while ctx allows.
func (r *RedisLimiter) Acquire(ctx context.Context, key string, n int) (func(), error) {
	k := r.prefix + "tool-slots:" + key
	var id [12]byte
	_, _ = crand.Read(id[:])
	holder := hex.EncodeToString(id[:])
	lease := r.lease.Milliseconds()
	poll := 5 * time.Millisecond
	for {
		got, err := acquireSlot.Run(ctx, r.client, []string{k}, holder, n, lease).Int()
		if err != nil {
			if ctx.Err() != nil {
				return nil, errNoTurn
			}
			return nil, fmt.Errorf("tool concurrency limit in redis: %w", err)
		}
		if got == 1 {
			break
		}
		if sleep(ctx, poll/2+rand.N(poll)) != nil {
			return nil, errNoTurn
		}
		poll = min(poll*2, 50*time.Millisecond)
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(r.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(context.Background(), r.lease/3)
				_ = renewSlot.Run(rctx, r.client, []string{k}, holder, lease).Err()
				cancel()
			}
		}
	}()
	return func() {
		close(stop)
		// Freed even when the call's context has ended; a failure leaves
		// the slot to its lease.
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = r.client.ZRem(rctx, k, holder).Err()
	}, nil
}
