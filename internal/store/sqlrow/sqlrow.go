// Package sqlrow is what the SQLite and PostgreSQL stores would otherwise
// both write: the column lists of the tables they share, scanning a row
// into a domain type and a domain type into a row's values, JSON column
// decoding, time conversion and not-found translation. It knows no
// engine: a row is anything with Scan (database/sql's and pgx's alike),
// and a time or JSON column is scanned through a destination that takes
// either engine's form of it. Each engine writes its SQL out in full.
package sqlrow

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

// Scanner is a row: *sql.Row, *sql.Rows, pgx.Row or pgx.Rows.
type Scanner interface{ Scan(dest ...any) error }

// ScanFunc scans with a function, to add columns after a row's usual ones.
type ScanFunc func(dest ...any) error

// Scan calls f.
func (f ScanFunc) Scan(dest ...any) error { return f(dest...) }

// With scans a row's usual columns, then more after them.
func With(s Scanner, more ...any) Scanner {
	return ScanFunc(func(dest ...any) error { return s.Scan(append(dest, more...)...) })
}

// Times is how an engine writes a time: SQLite as text (FormatTime),
// PostgreSQL as the time itself (Timestamp).
type Times func(time.Time) any

// FormatTime is t as SQLite keeps it: audit.TimeFormat text, UTC and
// microseconds at a fixed width, so times compare as they read and
// round-trip exactly.
func FormatTime(t time.Time) any { return t.UTC().Format(audit.TimeFormat) }

// Timestamp is t as PostgreSQL takes it, a timestamptz.
func Timestamp(t time.Time) any { return t }

// ParseTime reads a time kept as audit.TimeFormat text.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(audit.TimeFormat, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t, nil
}

// Time is a scan destination for a time column, SQLite's text or
// PostgreSQL's timestamptz; the time is UTC.
func Time(dst *time.Time) sql.Scanner { return timeDest{dst: dst} }

// TimeOrZero is a scan destination for a time column that may be unset:
// NULL or an empty text (SQLite's unset) leaves *dst the zero time.
func TimeOrZero(dst *time.Time) sql.Scanner { return timeDest{dst: dst, unset: true} }

type timeDest struct {
	dst *time.Time
	// unset is whether the column may be unset.
	unset bool
}

func (d timeDest) Scan(src any) error {
	t, err := scanTime(src)
	switch {
	case err != nil:
		return err
	case t != nil:
		*d.dst = *t
	case d.unset:
		*d.dst = time.Time{}
	default:
		return errors.New("stored time is NULL")
	}
	return nil
}

// OptionalTime is a scan destination for a time column that may be unset:
// NULL or an empty text (SQLite's unset) leaves *dst nil.
func OptionalTime(dst **time.Time) sql.Scanner { return optionalTimeDest{dst} }

type optionalTimeDest struct{ dst **time.Time }

func (d optionalTimeDest) Scan(src any) error {
	t, err := scanTime(src)
	*d.dst = t
	return err
}

func scanTime(src any) (*time.Time, error) {
	switch v := src.(type) {
	case nil:
		return nil, nil
	case time.Time:
		v = v.UTC()
		return &v, nil
	case string:
		return parseText(v)
	case []byte:
		return parseText(string(v))
	}
	return nil, fmt.Errorf("stored time: unexpected %T", src)
}

func parseText(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := ParseTime(s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// JSON is a scan destination for a JSON column, SQLite's text or
// PostgreSQL's jsonb, decoded into dst; NULL leaves dst as it is. what
// names the column in an error.
func JSON(dst any, what string) sql.Scanner { return jsonDest{dst, what} }

type jsonDest struct {
	dst  any
	what string
}

func (d jsonDest) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("decode %s: unexpected %T", d.what, src)
	}
	if err := json.Unmarshal(b, d.dst); err != nil {
		return fmt.Errorf("decode %s: %w", d.what, err)
	}
	return nil
}

// Raw is a scan destination for a JSON column kept as it is: NULL and
// an empty text (SQLite's unset) leaves *dst nil.
func Raw(dst *json.RawMessage) sql.Scanner { return rawDest{dst} }

type rawDest struct{ dst *json.RawMessage }

func (d rawDest) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.dst = nil
	case string:
		*d.dst = nil
		if v != "" {
			*d.dst = json.RawMessage(v)
		}
	case []byte:
		*d.dst = nil
		if len(v) > 0 {
			*d.dst = append(json.RawMessage(nil), v...)
		}
	default:
		return fmt.Errorf("stored JSON: unexpected %T", src)
	}
	return nil
}

// EncodeJSON is v as a JSON column's text; what names the column in an error.
func EncodeJSON(v any, what string) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", what, err)
	}
	return string(b), nil
}

// IsNoRows reports whether err says a query found no row, in either
// engine (pgx.ErrNoRows is sql.ErrNoRows too).
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// NotFound turns a query that found no row into problem.NotFound with the
// message format and args make; other errors pass as they are.
func NotFound(err error, format string, args ...any) error {
	if IsNoRows(err) {
		return problem.New(problem.NotFound, format, args...)
	}
	return err
}
