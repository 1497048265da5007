// Package realdocs provides real API descriptions that nobody on the project
// wrote — GitHub's REST and GraphQL descriptions, Kubernetes' Swagger 2.0
// document, Amazon EC2's WSDL and the Swagger Petstore — to benchmarks and
// opt-in tests. Each is
// fetched from a package registry (npm, or the Go module proxy) into a cache
// directory outside the repository the first time it is needed, at a pinned
// version; nothing here is used by the service.
package realdocs

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// A Doc is one pinned description.
type Doc struct {
	// Name is a short name for tables and logs.
	Name string
	// Kind is the importer that reads it: openapi, graphql or soap.
	Kind string
	// Source says where it comes from, with its version.
	Source string
	// Operations is how many operations the importer finds in it.
	Operations int

	fetch func(ctx context.Context, cache string) (string, error)
	gzip  bool
}

// The documents. Their versions are pinned: the operation counts, and the
// relevance figures tests assert, belong to these versions.
var (
	GitHubREST = Doc{
		Name: "github-rest", Kind: "openapi", Operations: 1223,
		Source: "npm @octokit/openapi@23.0.2, generated/api.github.com.json",
		fetch:  npm("@octokit/openapi", "23.0.2", "generated/api.github.com.json"),
	}
	GitHubGraphQL = Doc{
		Name: "github-graphql", Kind: "graphql", Operations: 278,
		Source: "npm @octokit/graphql-schema@15.26.1, schema.graphql",
		fetch:  npm("@octokit/graphql-schema", "15.26.1", "schema.graphql"),
	}
	Kubernetes = Doc{
		Name: "kubernetes", Kind: "openapi", Operations: 1014,
		Source: "npm kubernetes-client@9.0.0, lib/specs/swagger-1.13.json.gz (Kubernetes v1.13.4, Swagger 2.0)",
		fetch:  npm("kubernetes-client", "9.0.0", "lib/specs/swagger-1.13.json.gz"),
		gzip:   true,
	}
	EC2 = Doc{
		Name: "ec2", Kind: "soap", Operations: 151,
		Source: "Go module github.com/hooklift/gowsdl@v0.5.0, fixtures/ec2.wsdl (Amazon EC2 2010-08-31)",
		fetch:  gomod("github.com/hooklift/gowsdl", "v0.5.0", "fixtures/ec2.wsdl"),
	}
	Petstore = Doc{
		Name: "petstore", Kind: "openapi", Operations: 20,
		Source: "npm @readme/oas-examples@8.2.2, 3.0/json/petstore.json (Swagger Petstore 1.0.0)",
		fetch:  npm("@readme/oas-examples", "8.2.2", "3.0/json/petstore.json"),
	}
)

// All is every document of the relevance test set and the benchmarks, in a
// fixed order; Petstore serves the paraphrased queries only.
var All = []Doc{GitHubREST, GitHubGraphQL, Kubernetes, EC2}

// Read returns the document's bytes, fetching it first when it is not in the
// cache: $AGENTPLANE_BENCH_CACHE, else the user cache directory's
// agentplane-bench.
func (d Doc) Read(ctx context.Context) ([]byte, error) {
	cache, err := Cache()
	if err != nil {
		return nil, err
	}
	path, err := d.fetch(ctx, cache)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name, err)
	}
	if d.gzip {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	return data, nil
}

// Cache is the directory fetched packages are kept in:
// $AGENTPLANE_BENCH_CACHE, else the user cache directory's agentplane-bench.
func Cache() (string, error) {
	if cache := os.Getenv("AGENTPLANE_BENCH_CACHE"); cache != "" {
		return cache, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find cache directory: %w", err)
	}
	return filepath.Join(base, "agentplane-bench"), nil
}

// NPMDir returns the directory an npm package at version is installed in,
// installing it with `npm install` under cache when it is not there yet;
// want is a file inside the package that shows the install is complete.
func NPMDir(ctx context.Context, cache, pkg, version, want string) (string, error) {
	prefix := filepath.Join(cache, filepath.Base(pkg)+"-"+version)
	dir := filepath.Join(prefix, "node_modules", filepath.FromSlash(pkg))
	if _, err := os.Stat(filepath.Join(dir, want)); err == nil {
		return dir, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("look for %s: %w", want, err)
	}
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return "", fmt.Errorf("create cache directory: %w", err)
	}
	// Test packages run as processes of their own, at once, and may want
	// the same package: one installs it, the others wait and find it.
	unlock, err := lockFile(ctx, prefix+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, want)); err == nil {
		return dir, nil
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", prefix, pkg+"@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %w: %s", pkg, version, err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
		return "", fmt.Errorf("npm installed %s@%s without %s: %w", pkg, version, want, err)
	}
	return dir, nil
}

func npm(pkg, version, file string) func(context.Context, string) (string, error) {
	return func(ctx context.Context, cache string) (string, error) {
		dir, err := NPMDir(ctx, cache, pkg, version, file)
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, filepath.FromSlash(file)), nil
	}
}

// gomod reads a file from a module's zip on the Go module proxy, through
// `go mod download`, which keeps it in the module cache.
func gomod(module, version, file string) func(context.Context, string) (string, error) {
	return func(ctx context.Context, _ string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
		cmd.Dir = os.TempDir() // outside any module, so go.mod is not touched
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				out = append(out, ee.Stderr...)
			}
			return "", fmt.Errorf("go mod download %s@%s: %w: %s", module, version, err, out)
		}
		var info struct{ Dir, Error string }
		if err := json.Unmarshal(out, &info); err != nil {
			return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
		}
		if info.Error != "" {
			return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
		}
		return filepath.Join(info.Dir, filepath.FromSlash(file)), nil
	}
}

// lockFile takes an exclusive lock on the file at path (created if need
// be), waiting for another process holding it until ctx ends; unlock
// releases it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another install holding %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
