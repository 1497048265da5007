package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

func newVersion(tenant, name, version string, i int) *agent.Version {
	return &agent.Version{
		Tenant: tenant, Name: name, Version: version,
		Description: fmt.Sprintf("version %d of %s", i, name),
		Definition:  json.RawMessage(fmt.Sprintf(`{"steps": [{"call": "pets.listPets"}], "n": %d}`, i)),
		Tools:       []string{}, // the stores refuse to name tools that do not exist
		DeployedAt:  base.Add(time.Duration(i) * time.Minute),
	}
}

// deploy deploys a version and returns it as the store set it.
func deploy(t *testing.T, s Store, v *agent.Version, promote bool) *agent.Version {
	t.Helper()
	must(t, s.DeployVersion(ctxOf(t), v, promote, record(v.Tenant, "agent.deploy", 0)), "deploy "+v.Ref())
	return v
}

func versionNames(vs []*agent.Version) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Version)
	}
	return out
}

func testAgentDeploy(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	first := newVersion("acme", "triage", "", 1)
	first.DeployedAt = first.DeployedAt.Add(789) // finer than stores keep
	deploy(t, s, first, false)
	if first.Version != "1" || !first.Default {
		t.Fatalf("first version: version %q default %v; want \"1\", true", first.Version, first.Default)
	}
	if !first.DeployedAt.Equal(base.Add(time.Minute)) {
		t.Errorf("DeployedAt = %v, want it cut to the microsecond", first.DeployedAt)
	}
	got, err := s.AgentVersion(ctx, "acme", "triage", "")
	must(t, err, "default version")
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("AgentVersion(\"\") (-want +got):\n%s", diff)
	}

	beta := deploy(t, s, newVersion("acme", "triage", "beta", 2), false)
	if beta.Default {
		t.Error("a later version deployed without promote became the default")
	}
	second := deploy(t, s, newVersion("acme", "triage", "", 3), true)
	if second.Version != "2" || !second.Default {
		t.Errorf("promoted version: version %q default %v; want \"2\", true", second.Version, second.Default)
	}
	third := deploy(t, s, newVersion("acme", "triage", "", 4), false)

	a, err := s.Agent(ctx, "acme", "triage")
	must(t, err, "agent")
	want := &agent.Agent{Tenant: "acme", Name: "triage", DefaultVersion: "2", LatestVersion: "3", Versions: 4,
		Description: third.Description, CreatedAt: first.DeployedAt, UpdatedAt: third.DeployedAt}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("Agent (-want +got):\n%s", diff)
	}

	first.Default = false
	second.Default = true
	wantVersions(t, s, third, second, beta, first)
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: "agent.deploy"})
	must(t, err, "query audit")
	if len(recs) != 4 {
		t.Errorf("%d deploy audit records, want 4", len(recs))
	}
}

// testAgentExternalVersion: an external version's block round-trips
// exactly, beside a defined version of the same agent, which has none.
func testAgentExternalVersion(t *testing.T, s Store, _ Hooks) {
	defined := deploy(t, s, newVersion("acme", "triage", "", 1), false)
	ext := newVersion("acme", "triage", "", 2)
	ext.Definition = nil
	ext.External = &agent.External{
		URL:     "https://agents.example.com/triage?region=eu",
		Auth:    &agent.ExternalAuth{Type: agent.ExternalAuthAPIKey, SecretsRef: "env://TRIAGE_KEY", Header: "X-Agent-Key"},
		Timeout: "20m", MaxAttempts: 4,
		Tools: []string{}, Models: []string{"gpt", "default"},
		Policies:  map[string]agent.Policy{"financial": {Allow: "args.amount < 1000.0"}},
		Approvals: []agent.ApprovalRule{{When: "operation == 'refund'", Reason: "'refund'", ApproverScope: "approve:refunds", Timeout: "1h", OnTimeout: "deny", AllowSelf: true}},
		Inputs:    json.RawMessage(`{"type":"object","properties":{"ticket":{"type":"integer"}}}`),
		Limits:    &agent.ExternalLimits{MaxToolCalls: 20, MaxLLMTokens: 200000}, MaxConcurrency: 8,
	}
	deploy(t, s, ext, false)
	wantVersions(t, s, ext, defined)
}

// wantVersions checks that the store reads each of an agent's versions
// back as want, one by one and listed newest first.
func wantVersions(t *testing.T, s Store, want ...*agent.Version) {
	t.Helper()
	ctx := ctxOf(t)
	tenant, name := want[0].Tenant, want[0].Name
	for _, v := range want {
		got, err := s.AgentVersion(ctx, tenant, name, v.Version)
		must(t, err, "version "+v.Version)
		if diff := cmp.Diff(v, got); diff != "" {
			t.Errorf("AgentVersion(%q) (-want +got):\n%s", v.Version, diff)
		}
	}
	list, err := s.ListVersions(ctx, tenant, name)
	must(t, err, "list versions")
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("ListVersions newest first (-want +got):\n%s", diff)
	}
}

func testAgentAutoVersion(t *testing.T, s Store, _ Hooks) {
	tests := []struct {
		name     string
		existing []string
		want     string
	}{
		{"first", nil, "1"},
		{"skips non-integers", []string{"1", "beta", "2"}, "3"},
		{"only non-integers", []string{"beta", "v2", "1.5"}, "1"},
		{"numeric not lexical", []string{"9", "10", "2"}, "11"},
		{"leading zeros", []string{"007", "3"}, "8"},
		{"beyond int64", []string{"99999999999999999999"}, "100000000000000000000"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("auto-%d", i)
			for j, v := range tc.existing {
				deploy(t, s, newVersion("acme", name, v, j), false)
			}
			got := deploy(t, s, newVersion("acme", name, "", 9), false)
			if got.Version != tc.want {
				t.Errorf("after %q the next version is %q, want %q", tc.existing, got.Version, tc.want)
			}
		})
	}
}

func testAgentVersionConflict(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	deploy(t, s, newVersion("acme", "triage", "", 1), false)
	deploy(t, s, newVersion("acme", "triage", "v2", 2), false)
	for _, version := range []string{"1", "v2"} {
		dup := newVersion("acme", "triage", version, 3)
		wantCode(t, s.DeployVersion(ctx, dup, true, record("acme", "agent.deploy", 3)), problem.Conflict, "redeploy "+version)
	}
	a, err := s.Agent(ctx, "acme", "triage")
	must(t, err, "agent")
	if a.Versions != 2 || a.DefaultVersion != "1" || a.LatestVersion != "v2" {
		t.Errorf("after refused deploys: %d versions, default %q, latest %q; want 2, \"1\", \"v2\"",
			a.Versions, a.DefaultVersion, a.LatestVersion)
	}
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{})
	must(t, err, "query audit")
	if len(recs) != 2 {
		t.Errorf("%d audit records, want 2 (refused deploys append none)", len(recs))
	}
	// The same version of another agent is no conflict.
	deploy(t, s, newVersion("acme", "other", "v2", 4), false)
}

func testAgentSetDefault(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	deploy(t, s, newVersion("acme", "triage", "", 1), false)
	deploy(t, s, newVersion("acme", "triage", "", 2), false)
	must(t, s.SetDefault(ctx, "acme", "triage", "2", record("acme", "agent.set_default", 1)), "set default")
	v, err := s.AgentVersion(ctx, "acme", "triage", "")
	must(t, err, "default version")
	if v.Version != "2" || !v.Default {
		t.Errorf("default after SetDefault: %q (default %v), want \"2\"", v.Version, v.Default)
	}
	v, err = s.AgentVersion(ctx, "acme", "triage", "1")
	must(t, err, "version 1")
	if v.Default {
		t.Error("version 1 still reports being the default")
	}
	a, err := s.Agent(ctx, "acme", "triage")
	must(t, err, "agent")
	if a.DefaultVersion != "2" {
		t.Errorf("Agent.DefaultVersion = %q, want \"2\"", a.DefaultVersion)
	}

	wantCode(t, s.SetDefault(ctx, "acme", "triage", "7", record("acme", "agent.set_default", 2)),
		problem.AgentVersionNotFound, "unknown version")
	wantCode(t, s.SetDefault(ctx, "acme", "nobody", "1", record("acme", "agent.set_default", 3)),
		problem.NotFound, "unknown agent")
	wantCode(t, s.SetDefault(ctx, "globex", "triage", "1", record("globex", "agent.set_default", 4)),
		problem.NotFound, "another tenant's agent")
	recs, err := s.QueryAudit(ctx, "acme", audit.Filter{Action: "agent.set_default"})
	must(t, err, "query audit")
	if len(recs) != 1 {
		t.Errorf("%d set_default audit records, want 1 (refused ones append none)", len(recs))
	}
}

func testAgentNotFound(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	deploy(t, s, newVersion("acme", "triage", "", 1), false)
	tests := []struct {
		name, agent, version string
		want                 problem.Code
	}{
		{"unknown version", "triage", "9", problem.AgentVersionNotFound},
		{"unknown agent", "nobody", "1", problem.NotFound},
		{"unknown agent, default", "nobody", "", problem.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.AgentVersion(ctx, "acme", tc.agent, tc.version)
			wantCode(t, err, tc.want, "AgentVersion")
		})
	}
	_, err := s.Agent(ctx, "acme", "nobody")
	wantCode(t, err, problem.NotFound, "Agent of unknown agent")
	_, err = s.ListVersions(ctx, "acme", "nobody")
	wantCode(t, err, problem.NotFound, "ListVersions of unknown agent")
}

func testAgentTenantIsolation(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	deploy(t, s, newVersion("tenant-a", "triage", "", 1), false)
	deploy(t, s, newVersion("tenant-a", "triage", "", 2), false)

	_, err := s.Agent(ctx, "tenant-b", "triage")
	wantCode(t, err, problem.NotFound, "B reads A's agent")
	_, err = s.AgentVersion(ctx, "tenant-b", "triage", "1")
	wantCode(t, err, problem.NotFound, "B reads A's version")
	_, err = s.AgentVersion(ctx, "tenant-b", "triage", "")
	wantCode(t, err, problem.NotFound, "B reads A's default")
	_, err = s.ListVersions(ctx, "tenant-b", "triage")
	wantCode(t, err, problem.NotFound, "B lists A's versions")
	list, err := s.ListAgents(ctx, "tenant-b", "", 0)
	must(t, err, "B lists agents")
	if len(list) != 0 {
		t.Errorf("B lists %d agents, want 0", len(list))
	}

	// B's agent of the same name is its own, numbered from 1.
	mine := deploy(t, s, newVersion("tenant-b", "triage", "", 3), false)
	if mine.Version != "1" || !mine.Default {
		t.Errorf("B's first version: %q default %v; want \"1\", true", mine.Version, mine.Default)
	}
	a, err := s.Agent(ctx, "tenant-a", "triage")
	must(t, err, "A's agent")
	if a.Versions != 2 || a.LatestVersion != "2" {
		t.Errorf("A's agent after B deployed: %d versions, latest %q; want 2, \"2\"", a.Versions, a.LatestVersion)
	}
}

func testAgentList(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	names := []string{"b-agent", "a-agent", "a0", "zeta", "m-2", "m-10", "a-b"}
	for i, n := range names {
		deploy(t, s, newVersion("acme", n, "", i), false)
	}
	deploy(t, s, newVersion("acme", "zeta", "", 9), false)
	deploy(t, s, newVersion("globex", "other", "", 1), false)
	want := slices.Clone(names)
	slices.Sort(want)

	var got []string
	after := ""
	for range 10 {
		page, err := s.ListAgents(ctx, "acme", after, 3)
		must(t, err, "list")
		if len(page) > 3 {
			t.Fatalf("page of %d agents, limit 3", len(page))
		}
		for _, a := range page {
			got = append(got, a.Name)
			if a.Tenant != "acme" {
				t.Errorf("agent %s has tenant %q", a.Name, a.Tenant)
			}
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].Name
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged names (-want +got):\n%s", diff)
	}
	all, err := s.ListAgents(ctx, "acme", "", 0)
	must(t, err, "list default")
	if len(all) != len(names) {
		t.Fatalf("default limit listed %d agents, want %d", len(all), len(names))
	}
	zeta := all[len(all)-1]
	if zeta.Name != "zeta" || zeta.Versions != 2 || zeta.LatestVersion != "2" || zeta.DefaultVersion != "1" {
		t.Errorf("zeta in the list: %+v; want 2 versions, latest 2, default 1", zeta)
	}
}

func testAgentToolInUse(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	pets, shop := newTool("acme", "pets"), newTool("acme", "shop")
	must(t, s.CreateTool(ctx, pets, petOps(), nil), "create pets")
	must(t, s.CreateTool(ctx, shop, nil, nil), "create shop")
	v := newVersion("acme", "triage", "", 1)
	v.Tools = []string{"pets", "pets"} // a repeat is recorded once
	deploy(t, s, v, false)
	must(t, s.CreateTool(ctx, newTool("globex", "shop"), nil, nil), "create globex's shop")
	other := newVersion("globex", "triage", "", 1)
	other.Tools = []string{"shop"}
	deploy(t, s, other, false)

	wantCode(t, s.DeleteTool(ctx, "acme", pets.ID, nil), problem.Conflict, "delete a tool an agent version uses")
	must(t, s.DeleteTool(ctx, "acme", shop.ID, nil), "delete a tool only another tenant's agent names")

	// A deploy compiled against a tool deleted since is refused whole.
	late := newVersion("acme", "triage", "", 2)
	late.Tools = []string{"pets", "shop"}
	wantCode(t, s.DeployVersion(ctx, late, false, record("acme", "agent.deploy", 2)), problem.Conflict,
		"deploy a version naming a deleted tool")
	if vs, err := s.ListVersions(ctx, "acme", "triage"); err != nil || len(vs) != 1 {
		t.Errorf("versions after the refused deploy: %d (%v), want 1", len(vs), err)
	}
}

func testAgentConcurrentDeploy(t *testing.T, s Store, _ Hooks) {
	ctx := ctxOf(t)
	const n = 10
	vs := make([]*agent.Version, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range vs {
		vs[i] = newVersion("acme", "triage", "", i)
		wg.Go(func() { errs[i] = s.DeployVersion(ctx, vs[i], false, record("acme", "agent.deploy", i)) })
	}
	wg.Wait()
	var got []int
	defaults := 0
	for i, err := range errs {
		must(t, err, fmt.Sprintf("deploy %d", i))
		num, err := strconv.Atoi(vs[i].Version)
		if err != nil {
			t.Fatalf("deploy %d was assigned version %q, not an integer", i, vs[i].Version)
		}
		got = append(got, num)
		if vs[i].Default {
			defaults++
			if vs[i].Version != "1" {
				t.Errorf("version %q became the default; only the first may", vs[i].Version)
			}
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, got); diff != "" {
		t.Errorf("concurrently assigned versions (-want +got):\n%s", diff)
	}
	if defaults != 1 {
		t.Errorf("%d versions report being the default, want 1", defaults)
	}
	list, err := s.ListVersions(ctx, "acme", "triage")
	must(t, err, "list versions")
	if len(list) != n {
		t.Errorf("%d versions stored, want %d: %v", len(list), n, versionNames(list))
	}
	verifyOK(t, s, "acme", n)
}
