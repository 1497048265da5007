package sqlite

import (
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
)

// Times are stored as audit.TimeFormat text: UTC, microseconds, fixed width,
// so they compare as they read and round-trip exactly.
func fmtTime(t time.Time) string { return t.UTC().Format(audit.TimeFormat) }

// fmtTimeCeil formats t rounded up to the microsecond, for lower bounds.
func fmtTimeCeil(t time.Time) string {
	if u := t.Truncate(time.Microsecond); u.Before(t) {
		t = u.Add(time.Microsecond)
	}
	return fmtTime(t)
}

func parseTime(s string) (time.Time, error) { return sqlrow.ParseTime(s) }

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code()
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// likePattern is a LIKE pattern matching s anywhere, with s's wildcards
// escaped by backslash.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(strings.ToLower(s)) + "%"
}

// scanner is *sql.Row or *sql.Rows.
type scanner = sqlrow.Scanner

// scanFunc scans with a function, to add columns after a row's usual ones.
type scanFunc = sqlrow.ScanFunc

// likeEscape escapes LIKE's wildcards in s (with \ as the escape).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s)
}

// sortedKeys are m's keys in order, for stable queries.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// collect scans every row with scan, closing rows.
func collect[T any](rows *sql.Rows, scan func(sqlrow.Scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
