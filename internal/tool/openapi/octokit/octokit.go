// Package octokit provides GitHub's REST API descriptions, from the npm
// package @octokit/openapi, to benchmarks and opt-in tests. The package is
// installed with npm into a cache directory outside the repository the first
// time it is needed; nothing here is used by the service.
package octokit

import (
	"context"
	"path/filepath"

	"github.com/agentplane/agentplane/internal/realdocs"
)

// Version is the pinned package version; the operation counts tests assert
// belong to it.
const Version = "23.0.2"

// Operation counts (path × method) of the descriptions in Version.
var Operations = map[string]int{
	"api.github.com.json": 1223,
	"ghec.json":           1471,
	"ghes-3.19.json":      1039,
}

// Dir returns the directory holding the generated descriptions
// (api.github.com.json, ghec.json, …), installing the package with npm into
// realdocs.Cache() when it is not there yet.
func Dir(ctx context.Context) (string, error) {
	return DirOf(ctx, Version)
}

// DirOf is Dir for another published version of the package (tool drift
// compares two of them).
func DirOf(ctx context.Context, version string) (string, error) {
	cache, err := realdocs.Cache()
	if err != nil {
		return "", err
	}
	dir, err := realdocs.NPMDir(ctx, cache, "@octokit/openapi", version, "generated/api.github.com.json")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "generated"), nil
}
