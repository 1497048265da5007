package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParseTimingRefusesWhatNeverOrTooOftenFires(t *testing.T) {
	for _, tc := range []struct {
		cron, tz, field, says string
	}{
		{"0 0 30 2 *", "", "cron", "never fires"},
		{"@every 10s", "", "cron", "shorter than the minimum of 1m"},
		{"@every soon", "", "cron", "takes a duration"},
		{"* * * * * *", "", "cron", "5-field"},
		{"61 * * * *", "", "cron", "5-field"},
		{"TZ=UTC 0 9 * * *", "", "cron", "timezone field"},
		{"0 9 * * *", "Mars/Olympus", "timezone", "IANA"},
		{"0 9 * * *", "Local", "timezone", "IANA"},
	} {
		_, errs := ParseTiming(tc.cron, tc.tz)
		if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Message, tc.says) {
			t.Errorf("ParseTiming(%q, %q) = %+v, want one error on %s saying %q", tc.cron, tc.tz, errs, tc.field, tc.says)
		}
	}
}

func TestTimingDueTimes(t *testing.T) {
	at := time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC) // the night before Paris moves to summer time
	paris, errs := ParseTiming("30 2 * * *", "Europe/Paris")
	if errs != nil {
		t.Fatal(errs)
	}
	// 02:30 does not exist in Paris on 29 March 2026: the next is 30 March, 00:30 UTC.
	if got, want := paris.Next(at), time.Date(2026, 3, 30, 0, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Next = %v, want %v", got, want)
	}
	every, errs := ParseTiming("@every 15m", "")
	if errs != nil {
		t.Fatal(errs)
	}
	if got, want := every.Next(at.Add(time.Second)), at.Add(15*time.Minute); !got.Equal(want) {
		t.Errorf("@every Next = %v, want %v", got, want)
	}
	if got, want := every.Latest(at.Add(-time.Hour), at.Add(14*time.Minute)), at; !got.Equal(want) {
		t.Errorf("@every Latest = %v, want %v", got, want)
	}
	if got := every.Latest(at, at.Add(14*time.Minute)); !got.IsZero() {
		t.Errorf("Latest with nothing due = %v, want zero", got)
	}
	daily, _ := ParseTiming("0 9 * * *", "UTC")
	if got, want := daily.Latest(at.Add(-72*time.Hour), at), time.Date(2026, 3, 28, 9, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("cron Latest = %v, want %v", got, want)
	}
}
