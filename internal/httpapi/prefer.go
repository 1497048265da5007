package httpapi

import (
	"net/http"
	"strings"
)

// preferAsync is the RFC 7240 preference asking for a 202 and a resource
// to poll instead of waiting for the work to end.
const preferAsync = "respond-async"

// prefers reports whether the request's Prefer headers (RFC 7240 §2) hold
// the preference name, compared without case. A header may list several
// preferences separated by commas, each with an optional value and
// parameters after semicolons; quoted strings may hold either separator.
// Preferences the server does not know are ignored, as the RFC asks.
func prefers(h http.Header, name string) bool {
	for _, line := range h.Values("Prefer") {
		for _, pref := range splitOutsideQuotes(line, ',') {
			token, _, _ := strings.Cut(splitOutsideQuotes(pref, ';')[0], "=")
			if strings.EqualFold(strings.TrimSpace(token), name) {
				return true
			}
		}
	}
	return false
}

// splitOutsideQuotes splits s at each sep that is not inside a quoted
// string (where a backslash escapes the next character).
func splitOutsideQuotes(s string, sep byte) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// applyAsync tells the client its respond-async preference was honoured.
func applyAsync(w http.ResponseWriter, location string) {
	w.Header().Set("Location", location)
	w.Header().Set("Preference-Applied", preferAsync)
}
