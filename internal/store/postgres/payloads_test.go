package postgres

import (
	"strings"
	"testing"
)

// TestPayloadsStayUnderNotifysLimit checks that many ids are split into
// notifications each under NOTIFY's 8000 bytes, none lost.
func TestPayloadsStayUnderNotifysLimit(t *testing.T) {
	t.Parallel()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "wf_01M89BEPZWBYKS7SB61BB7SJFJ"
	}
	ps := payloads("origin", changeChanged, ids)
	if len(ps) < 2 {
		t.Fatalf("%d payloads for %d ids, want several", len(ps), len(ids))
	}
	n := 0
	for _, p := range ps {
		if len(p) > maxPayload {
			t.Errorf("payload of %d bytes, over %d", len(p), maxPayload)
		}
		f := strings.Fields(p)
		if f[0] != "origin" || f[1] != changeChanged {
			t.Errorf("payload starts %q %q", f[0], f[1])
		}
		n += len(f) - 2
	}
	if n != len(ids) {
		t.Errorf("%d ids in the payloads, want %d", n, len(ids))
	}
}
