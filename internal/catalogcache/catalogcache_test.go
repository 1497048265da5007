package catalogcache_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/catalogcache"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
)

// counting is the SQLite store counting the reads the cache may spare.
type counting struct {
	*sqlite.DB
	versions, tools, rollouts atomic.Int64
}

func (c *counting) AgentVersion(ctx context.Context, tenant, name, version string) (*agent.Version, error) {
	c.versions.Add(1)
	return c.DB.AgentVersion(ctx, tenant, name, version)
}

func (c *counting) ToolByName(ctx context.Context, tenant, name string) (*tool.Tool, error) {
	c.tools.Add(1)
	return c.DB.ToolByName(ctx, tenant, name)
}

func (c *counting) ActiveRollout(ctx context.Context, tenant, agentName string) (*rollout.Rollout, error) {
	c.rollouts.Add(1)
	return c.DB.ActiveRollout(ctx, tenant, agentName)
}

func deploy(t *testing.T, db *sqlite.DB, version string, promote bool) {
	t.Helper()
	v := &agent.Version{Tenant: "acme", Name: "triage", Version: version, Tools: []string{},
		Definition: json.RawMessage(`{"steps": [{"action": "done", "outcome": "'ok'"}]}`), DeployedAt: time.Now()}
	if err := db.DeployVersion(context.Background(), v, promote, nil); err != nil {
		t.Fatal(err)
	}
}

// TestReadsAreKeptWhileTheCatalogHolds: reads made at one generation are
// read once; a change to the catalog, committed, is seen by the next
// invocation; a context without a generation always reads the store.
func TestReadsAreKeptWhileTheCatalogHolds(t *testing.T) {
	db := sqlite.NewTestDB(t)
	st := &counting{DB: db}
	cache := catalogcache.New(db, 0)
	versions := catalogcache.Versions{VersionStore: st, Cache: cache}
	tools := catalogcache.Tools{ToolLookup: st, Cache: cache}
	rollouts := catalogcache.Rollouts{Store: st, Cache: cache}
	ctx := context.Background()
	deploy(t, db, "1", false)
	pets := &tool.Tool{ID: "tool_pets", Tenant: "acme", Name: "pets", Type: tool.OpenAPI, Revision: 1, SideEffects: []string{}}
	if err := db.CreateTool(ctx, pets, nil, nil); err != nil {
		t.Fatal(err)
	}

	invoke := func() (version string) {
		t.Helper()
		at := cache.At(ctx, "acme")
		if _, err := rollouts.ActiveRollout(at, "acme", "triage"); !problem.Is(err, problem.NotFound) {
			t.Fatalf("active rollout: %v, want not found", err)
		}
		v, err := versions.AgentVersion(at, "acme", "triage", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tools.ToolByName(at, "acme", "pets"); err != nil {
			t.Fatal(err)
		}
		v.Description = "changed by its caller" // each caller has its own copy
		return v.Version
	}
	reads := func() [3]int64 { return [3]int64{st.versions.Load(), st.tools.Load(), st.rollouts.Load()} }

	for range 3 {
		if got := invoke(); got != "1" {
			t.Fatalf("version %s, want 1", got)
		}
	}
	if got := reads(); got != [3]int64{1, 1, 1} {
		t.Errorf("reads (version, tool, rollout) after 3 invocations = %v, want one each", got)
	}
	if v, _ := versions.AgentVersion(cache.At(ctx, "acme"), "acme", "triage", ""); v.Description != "" {
		t.Errorf("a cached version carries a caller's change: %q", v.Description)
	}

	deploy(t, db, "2", true)
	if got := invoke(); got != "2" {
		t.Errorf("after version 2 was promoted the invocation runs %s", got)
	}
	if got := reads(); got != [3]int64{2, 2, 2} {
		t.Errorf("reads after the change = %v, want each read again once", got)
	}

	// Another tenant's generation is not acme's.
	if _, err := versions.AgentVersion(cache.At(ctx, "globex"), "acme", "triage", ""); err != nil {
		t.Fatal(err)
	}
	// Without a generation, every read goes to the store.
	for range 2 {
		if _, err := versions.AgentVersion(ctx, "acme", "triage", ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.versions.Load(); got != 5 {
		t.Errorf("version reads = %d, want 5: another tenant's generation and no generation read the store", got)
	}
}
