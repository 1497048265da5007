package memo

import (
	"strconv"
	"sync"
	"testing"
)

func TestByBytesBuildsOnceAndStaysBounded(t *testing.T) {
	var c ByBytes[int]
	builds := 0
	length := func(b []byte) int { builds++; return len(b) }
	for range 3 {
		if got := c.Get([]byte("schema"), length); got != 6 {
			t.Fatalf("Get = %d, want 6", got)
		}
	}
	if builds != 1 {
		t.Errorf("%d builds of one key, want 1", builds)
	}
	for i := range 3 * Max {
		c.Get([]byte(strconv.Itoa(i)), length)
	}
	if len(c.m) > Max {
		t.Errorf("%d keys remembered, want at most %d", len(c.m), Max)
	}
}

func TestByBytesConcurrent(t *testing.T) {
	var c ByBytes[string]
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				k := []byte(strconv.Itoa((i + j) % 50))
				if got := c.Get(k, func(b []byte) string { return string(b) }); got != string(k) {
					t.Errorf("Get(%s) = %s", k, got)
				}
			}
		})
	}
	wg.Wait()
}
