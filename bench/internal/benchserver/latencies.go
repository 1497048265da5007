package benchserver

import (
	"slices"
	"time"
)

// Latencies are the durations of a benchmark's requests.
type Latencies []time.Duration

// P is the q-th percentile (nearest rank); 0 when there is none.
func (l Latencies) P(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(q/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
