package sqlrow_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

var at = time.Date(2026, 3, 1, 12, 30, 0, 123456000, time.UTC)

// TestTime: a time column reads the same from SQLite's text and
// PostgreSQL's timestamptz, in UTC, and refuses NULL and bad text.
func TestTime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     any
		wantErr bool
	}{
		{"text", "2026-03-01T12:30:00.123456Z", false},
		{"bytes", []byte("2026-03-01T12:30:00.123456Z"), false},
		{"timestamptz", at.In(time.FixedZone("CET", 3600)), false},
		{"null", nil, true},
		{"bad text", "yesterday", true},
		{"integer", int64(1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got time.Time
			err := sqlrow.Time(&got).Scan(tc.src)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Scan(%v) error = %v, want error %v", tc.src, err, tc.wantErr)
			}
			if err == nil && (!got.Equal(at) || got.Location() != time.UTC) {
				t.Errorf("Scan(%v) = %v, want %v in UTC", tc.src, got, at)
			}
		})
	}
}

// TestOptionalTime: NULL and SQLite's empty text are no time.
func TestOptionalTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  any
		want *time.Time
	}{
		{"null", nil, nil},
		{"empty text", "", nil},
		{"text", "2026-03-01T12:30:00.123456Z", &at},
		{"timestamptz", at, &at},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := &time.Time{}
			if err := sqlrow.OptionalTime(&got).Scan(tc.src); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestTimeOrZero: NULL and SQLite's empty text are the zero time, over
// whatever the destination held.
func TestTimeOrZero(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  any
		want time.Time
	}{
		{"null", nil, time.Time{}},
		{"empty text", "", time.Time{}},
		{"text", "2026-03-01T12:30:00.123456Z", at},
		{"timestamptz", at.In(time.FixedZone("CET", 3600)), at},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := time.Now()
			if err := sqlrow.TimeOrZero(&got).Scan(tc.src); err != nil {
				t.Fatalf("Scan(%v): %v", tc.src, err)
			}
			if !got.Equal(tc.want) || !got.IsZero() && got.Location() != time.UTC {
				t.Errorf("Scan(%v) = %v, want %v", tc.src, got, tc.want)
			}
		})
	}
	var got time.Time
	if err := sqlrow.TimeOrZero(&got).Scan("yesterday"); err == nil {
		t.Error("Scan(\"yesterday\") = nil error, want one")
	}
}

// TestJSON: a JSON column decodes from text or jsonb bytes; NULL leaves
// the destination alone; bad JSON names the column.
func TestJSON(t *testing.T) {
	for _, src := range []any{`["a","b"]`, []byte(`["a","b"]`)} {
		var got []string
		if err := sqlrow.JSON(&got, "scopes").Scan(src); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
			t.Errorf("%T (-want +got):\n%s", src, diff)
		}
	}
	kept := []string{"kept"}
	if err := sqlrow.JSON(&kept, "scopes").Scan(nil); err != nil || len(kept) != 1 {
		t.Errorf("NULL: %v, %v; want the destination kept", kept, err)
	}
	if err := sqlrow.JSON(&kept, "scopes").Scan("{"); err == nil {
		t.Error("bad JSON: no error")
	}

	var raw json.RawMessage
	for _, src := range []any{nil, ""} {
		if err := sqlrow.Raw(&raw).Scan(src); err != nil || raw != nil {
			t.Errorf("Raw(%q) = %q, %v; want nil", src, raw, err)
		}
	}
	if err := sqlrow.Raw(&raw).Scan([]byte(`{"a":1}`)); err != nil || string(raw) != `{"a":1}` {
		t.Errorf("Raw = %q, %v", raw, err)
	}
}

// TestNotFound: either engine's missing row becomes problem.NotFound with
// the message given; other errors pass unchanged.
func TestNotFound(t *testing.T) {
	for _, noRows := range []error{sql.ErrNoRows, pgx.ErrNoRows, fmt.Errorf("load: %w", sql.ErrNoRows)} {
		err := sqlrow.NotFound(noRows, "no tool with id %q", "t1")
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Code != problem.NotFound || pe.Detail != `no tool with id "t1"` {
			t.Errorf("NotFound(%v) = %#v", noRows, err)
		}
	}
	other := errors.New("connection reset")
	if err := sqlrow.NotFound(other, "no tool"); err != other {
		t.Errorf("NotFound(other) = %v, want it unchanged", err)
	}
	if err := sqlrow.NotFound(nil, "no tool"); err != nil {
		t.Errorf("NotFound(nil) = %v", err)
	}
}

// TestFormatTime: SQLite's text round-trips through ParseTime.
func TestFormatTime(t *testing.T) {
	s := sqlrow.FormatTime(at.In(time.FixedZone("CET", 3600))).(string)
	if s != "2026-03-01T12:30:00.123456Z" {
		t.Errorf("FormatTime = %q", s)
	}
	back, err := sqlrow.ParseTime(s)
	if err != nil || !back.Equal(at) {
		t.Errorf("ParseTime(%q) = %v, %v", s, back, err)
	}
}
