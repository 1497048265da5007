package postgres

import "strings"

// likePattern is an (I)LIKE pattern matching s anywhere, with s's wildcards
// escaped by backslash, LIKE's default escape character.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}
