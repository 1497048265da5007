package main

import (
	"strings"
	"testing"
	"time"
)

func TestTimeFlagTakesATimeOrADurationBeforeNow(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ in, want string }{
		{"2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z"},
		{"2026-11-01T01:00:00+01:00", "2026-11-01T00:00:00Z"},
		{"90m", "2026-11-26T10:30:00Z"},
		{"168h", "2026-11-19T12:00:00Z"},
		{"7d", "2026-11-19T12:00:00Z"},
	} {
		f := newTimeFlag(func() time.Time { return now })
		if err := f.Set(tc.in); err != nil {
			t.Errorf("Set(%q): %v", tc.in, err)
			continue
		}
		if got := f.RFC3339(); got != tc.want {
			t.Errorf("Set(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"yesterday", "-5m", "0s", "0d", "2026-11-01"} {
		f := newTimeFlag(func() time.Time { return now })
		if err := f.Set(bad); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
			t.Errorf("Set(%q) = %v, want an error saying what it takes", bad, err)
		}
	}
	if got := newTimeFlag(time.Now).RFC3339(); got != "" {
		t.Errorf("unset flag = %q, want empty", got)
	}
}
