package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// testRedactionKeys: a tenant's key is made once, whichever replica asks
// first, and each tenant has its own.
func testRedactionKeys(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	var wg sync.WaitGroup
	results := make([][]byte, 8)
	for i := range results {
		wg.Go(func() {
			k, err := s.RedactionKey(ctx, "acme", fmt.Appendf(nil, "key-of-replica-%d-0123456789abcdef", i))
			if err != nil {
				t.Errorf("redaction key: %v", err)
			}
			results[i] = k
		})
	}
	wg.Wait()
	for i, k := range results {
		if len(k) == 0 || !bytes.Equal(k, results[0]) {
			t.Fatalf("replica %d got key %q, replica 0 %q", i, k, results[0])
		}
	}
	again, err := s.RedactionKey(ctx, "acme", []byte("late"))
	must(t, err, "redaction key again")
	if !bytes.Equal(again, results[0]) {
		t.Error("a later caller replaced the tenant's key")
	}
	other, err := s.RedactionKey(ctx, "globex", []byte("globex-key"))
	must(t, err, "other tenant's key")
	if string(other) != "globex-key" {
		t.Errorf("tenant globex got %q, want its own key", other)
	}
}
