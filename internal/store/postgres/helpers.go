package postgres

import "strings"

// likePattern is an (I)LIKE pattern matching s anywhere, with s's wildcards
// escaped by backslash, LIKE's default escape character.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// scanFunc scans with a function, to add columns after a row's usual ones.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }
