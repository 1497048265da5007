package retention_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/store/sqlite"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"0", 0, ""},
		{"90d", 90 * 24 * time.Hour, ""},
		{" 720h ", 720 * time.Hour, ""},
		{"1h", time.Hour, ""},
		{"59m59s", 0, "shorter than the minimum of one hour"},
		{"0d", 0, "not a number of days"},
		{"1.5d", 0, "not a number of days"},
		{"", 0, "not a number of days"},
		{"forever", 0, "not a number of days (90d)"},
		{"-1h", 0, "shorter than the minimum"},
	} {
		got, err := retention.ParseDuration(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseDuration(%q) error = %v, want one containing %q", tc.in, err, tc.err)
		}
	}
	tenant, d, err := retention.ParseTenant("acme=30d")
	if tenant != "acme" || d != 30*24*time.Hour || err != nil {
		t.Errorf("ParseTenant(acme=30d) = %q, %v, %v", tenant, d, err)
	}
	for _, bad := range []string{"acme", "=30d", "acme=30m"} {
		if _, _, err := retention.ParseTenant(bad); err == nil {
			t.Errorf("ParseTenant(%q) accepted", bad)
		}
	}
	if (retention.Policy{Tenants: map[string]time.Duration{"acme": 0}}).Enabled() {
		t.Error("a policy keeping everything forever is enabled")
	}
}

// TestOneReplicaSweepsAtATime: while one sweeper holds the lease another's
// pass does nothing; once it lapses, the other takes over.
func TestOneReplicaSweepsAtATime(t *testing.T) {
	db := sqlite.NewTestDB(t)
	now := time.Now()
	sweeper := func(owner string, at time.Time) *retention.Sweeper {
		return &retention.Sweeper{Store: db, Owner: owner, Every: time.Minute,
			Policy: retention.Policy{Default: time.Hour}, Now: func() time.Time { return at }}
	}
	var held []bool
	for _, s := range []*retention.Sweeper{sweeper("a", now), sweeper("b", now.Add(time.Minute)),
		sweeper("a", now.Add(90*time.Second)), sweeper("b", now.Add(5*time.Minute))} {
		res, err := s.Sweep(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, res.Held)
	}
	if diff := cmp.Diff([]bool{true, false, true, true}, held); diff != "" {
		t.Errorf("who swept (-want +got):\n%s", diff)
	}
}

// TestCountsAdd: every count adds, the last one listed too.
func TestCountsAdd(t *testing.T) {
	a := retention.Counts{Workflows: 2, Steps: 6, PushConfigs: 1}
	a.Add(retention.Counts{Workflows: 1, Steps: 3, Replays: 4, PushConfigs: 2})
	if want := (retention.Counts{Workflows: 3, Steps: 9, Replays: 4, PushConfigs: 3}); a != want {
		t.Errorf("sum %+v, want %+v", a, want)
	}
}
