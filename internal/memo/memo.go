// Package memo remembers what is made of byte strings that come again and
// again, such as the JSON Schemas every request of an agent version
// carries, so each is worked on once.
package memo

import "sync"

// Max bounds the keys a ByBytes remembers: past it, all are forgotten at
// once and remembering starts again.
const Max = 1024

// ByBytes remembers build's value of each key by the key's bytes. The
// zero value is ready; it is safe for concurrent use.
type ByBytes[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// Get is build(key), built the first time key is seen (build runs outside
// the lock, and may run twice for a key asked twice at once).
func (c *ByBytes[T]) Get(key []byte, build func([]byte) T) T {
	c.mu.Lock()
	v, ok := c.m[string(key)]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = build(key)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= Max {
		c.m = map[string]T{}
	}
	c.m[string(key)] = v
	c.mu.Unlock()
	return v
}
