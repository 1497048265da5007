package httpapi

import (
	"fmt"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// DefaultMaxStreamsPerTenant is how many event streams a tenant may hold
// open on one server when Config does not say.
const DefaultMaxStreamsPerTenant = 100

// streamRetry is the Retry-After of a stream refused for the cap: a slot
// frees only when another of the tenant's streams ends.
const streamRetry = 5 * time.Second

// streamLimit counts each tenant's open event streams on this server, so
// that one tenant's followers (each holds a connection for as long as its
// workflow runs or waits) cannot take every connection and read the store
// has.
type streamLimit struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

func newStreamLimit(max int) *streamLimit {
	return &streamLimit{max: max, open: map[string]int{}}
}

// acquire takes one of tenant's streams; release gives it back. At the cap
// it refuses with 429 rate-limited.
func (l *streamLimit) acquire(tenant string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[tenant] >= l.max {
		return nil, &problem.Error{Code: problem.RateLimited, RetryAfter: streamRetry,
			Detail: fmt.Sprintf("%d event streams of this tenant are open on this server, the most allowed: close one, or retry in %d s",
				l.max, int(streamRetry.Seconds()))}
	}
	l.open[tenant]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.open[tenant]--; l.open[tenant] <= 0 {
			delete(l.open, tenant)
		}
	}, nil
}
