// Package octokit provides GitHub's REST API descriptions, from the npm
// package @octokit/openapi, to benchmarks and opt-in tests. The package is
// installed with npm into a cache directory outside the repository the first
// time it is needed; nothing here is used by the service.
package octokit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// (api.github.com.json, ghec.json, …), installing the package with
// `npm install` into $AGENTPLANE_BENCH_CACHE, else the user cache directory's
// agentplane-bench/octokit-<Version>, when it is not there yet.
func Dir(ctx context.Context) (string, error) {
	cache := os.Getenv("AGENTPLANE_BENCH_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("find cache directory: %w", err)
		}
		cache = filepath.Join(base, "agentplane-bench")
	}
	prefix := filepath.Join(cache, "octokit-"+Version)
	dir := filepath.Join(prefix, "node_modules", "@octokit", "openapi", "generated")
	if _, err := os.Stat(filepath.Join(dir, "api.github.com.json")); err == nil {
		return dir, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("look for descriptions: %w", err)
	}
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return "", fmt.Errorf("create cache directory: %w", err)
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", prefix, "@octokit/openapi@"+Version)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install @octokit/openapi@%s: %w: %s", Version, err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "api.github.com.json")); err != nil {
		return "", fmt.Errorf("npm installed no api.github.com.json: %w", err)
	}
	return dir, nil
}
