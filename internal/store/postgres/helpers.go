package postgres

import (
	"slices"
	"strings"

	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/jackc/pgx/v5"
)

// likePattern is an (I)LIKE pattern matching s anywhere, with s's wildcards
// escaped by backslash, LIKE's default escape character.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

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
func collect[T any](rows pgx.Rows, scan func(sqlrow.Scanner) (T, error)) ([]T, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}
