package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// timeFlag is a point in time given on the command line either as an RFC 3339
// time or as a duration before now ("90m", "168h", "7d"), so every --since
// and --until takes both.
type timeFlag struct {
	raw string
	at  time.Time
	now func() time.Time
}

// newTimeFlag returns an empty timeFlag resolving durations against now.
func newTimeFlag(now func() time.Time) *timeFlag { return &timeFlag{now: now} }

func (f *timeFlag) String() string { return f.raw }

func (f *timeFlag) Type() string { return "time" }

func (f *timeFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		f.raw, f.at = s, t
		return nil
	}
	d, err := parseAgo(s)
	if err != nil {
		return fmt.Errorf("%q is neither an RFC 3339 time (2026-11-01T00:00:00Z) nor a duration before now (90m, 168h, 7d)", s)
	}
	f.raw, f.at = s, f.now().Add(-d)
	return nil
}

// RFC3339 is the time as the API takes it, or "" when the flag is unset.
func (f *timeFlag) RFC3339() string {
	if f.raw == "" {
		return ""
	}
	return f.at.UTC().Format(time.RFC3339Nano)
}

// parseAgo parses a positive Go duration, or a whole number of days ("7d").
func parseAgo(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("bad number of days %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = fmt.Errorf("duration %q is not positive", s)
	}
	return d, err
}
