package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentplane/agentplane/internal/problem"
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

// TestRefusalWords: a skipped due time keeps the refusal's code, detail
// and the fields the detail does not name, never its cause, and at most
// maxReason bytes of it.
func TestRefusalWords(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.7:5432: secret-host unreachable")
	long := strings.Repeat("é", maxReason)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"fields the detail names", &problem.Error{Code: problem.ValidationFailed, Detail: "context.region: is required",
			Errors: []problem.FieldError{{Field: "context.region", Message: "is required"}}},
			"validation-failed: context.region: is required"},
		{"fields it does not", &problem.Error{Code: problem.ValidationFailed, Detail: "the context does not fit the agent's inputs",
			Errors: []problem.FieldError{{Field: "context.region", Message: "is required"}, {Field: "context.queue", Message: "must be a string"}}},
			"validation-failed: the context does not fit the agent's inputs (context.region: is required; context.queue: must be a string)"},
		{"a cause", &problem.Error{Code: problem.NotFound, Detail: "agent sweep not found", Err: cause}, "not-found: agent sweep not found"},
		{"not a problem", cause, "internal"},
	} {
		if got := refusal(tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	got := refusal(problem.New(problem.ValidationFailed, "%s", long))
	if len(got) > maxReason+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("a long refusal kept %d bytes (valid UTF-8 %t), want at most %d and an ellipsis", len(got), utf8.ValidString(got), maxReason)
	}
}
