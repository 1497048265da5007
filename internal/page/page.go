// Package page holds the page-size rule every list of the API shares:
// tools, agents and workflows (the audit log has its own, larger pages).
package page

import (
	"strconv"

	"github.com/agentplane/agentplane/internal/problem"
)

// Page sizes.
const (
	Default = 50
	Max     = 200
)

// Size clamps a requested page size: 0 or less is Default, above Max is Max.
func Size(n int) int {
	if n <= 0 {
		return Default
	}
	return min(n, Max)
}

// ParseSize reads a limit parameter: "" is Default; anything but an integer
// from 1 to Max is a validation error naming field.
func ParseSize(field, s string) (int, error) {
	if s == "" {
		return Default, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > Max {
		return 0, problem.Field(field, "must be an integer from 1 to %d", Max)
	}
	return n, nil
}
