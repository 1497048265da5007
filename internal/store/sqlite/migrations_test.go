package sqlite

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/migrate"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/store/storetest"
)

// oldSteps are steps recorded before migration 4, which added sent: only
// a tool step that ended ok or in error with a sign of its call was sent.
var oldSteps = []struct {
	name, tool, status string
	attempts, http     int
	request            any
	sent               bool
}{
	{"call answered", "pets", "ok", 1, 200, `{"method": "GET"}`, true},
	{"call failed upstream", "pets", "error", 0, 503, nil, true},
	{"call with only its request", "pets", "ok", 0, 0, `{"method": "GET"}`, true},
	{"call denied", "pets", "error", 0, 0, nil, false},
	{"call over the limit", "pets", "limit_exceeded", 1, 0, nil, false},
	{"plan step", "", "ok", 1, 200, `{}`, false},
}

// TestStepsMigrationSetsSent upgrades a database holding steps recorded
// before migration 4: sent is derived, completion is gone, and replays can
// be stored.
func TestStepsMigrationSetsSent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentplane.db")
	raw := migratedBefore(t, path, "replays")
	for i, s := range oldSteps {
		if _, err := raw.ExecContext(ctx, `INSERT INTO workflow_steps (workflow_id, seq, step, action, kind,
			status, tool, operation, args, score, queue, outcome, result, error, request, http_status, attempts,
			started_at, duration_ms, completion)
			VALUES ('wf_1', ?, ?, ?, 'call', ?, ?, 'listPets', NULL, NULL, '', '', NULL, '', ?, ?, ?, ?, 5, '{}')`,
			i+1, i+1, s.name, s.status, s.tool, s.request, s.http, s.attempts, sqlrow.FormatTime(time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC))); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open and migrate: %v", err)
	}
	defer db.Close()
	steps, err := db.Steps(ctx, "wf_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	want, got := map[string]bool{}, map[string]bool{}
	for _, s := range oldSteps {
		want[s.name] = s.sent
	}
	for _, s := range steps {
		got[s.Action] = s.Sent
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sent by step (-want +got):\n%s", diff)
	}
	if _, err := db.rdb.ExecContext(ctx, `SELECT completion FROM workflow_steps`); err == nil ||
		!strings.Contains(err.Error(), "no such column") {
		t.Errorf("select completion: %v, want no such column", err)
	}
	r := &replay.Replay{ID: "rpl_1", Tenant: "acme", WorkflowID: "wf_1", Target: "triage@2"}
	if err := db.CreateReplay(ctx, r, nil); err != nil {
		t.Fatalf("create replay: %v", err)
	}
	if _, err := db.Replay(ctx, "acme", "rpl_1"); err != nil {
		t.Errorf("read replay: %v", err)
	}
}

// migratedBefore returns a database at path migrated up to, not
// including, the migration named name.
func migratedBefore(t *testing.T, path, name string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	n := slices.IndexFunc(ms, func(m migrate.Migration) bool { return m.Name == name })
	if n < 0 {
		t.Fatalf("no migration %s", name)
	}
	if _, err := migrate.Run(t.Context(), target{raw}, ms[:n]); err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestBatchCountersMigrationCountsStoredBatches upgrades a database holding
// batches stored before the batch counters: each batch counts its replayed
// items and those whose outcome changed, and reads as it did.
func TestBatchCountersMigrationCountsStoredBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentplane.db")
	raw := migratedBefore(t, path, "batch_counters")
	created := fmtTime(time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC))
	for _, b := range storetest.UncountedBatches {
		if _, err := raw.ExecContext(ctx, `INSERT INTO replay_batches (id, tenant, target, status, total, creator, created_at)
			VALUES (?, 'acme', 'triage@2', ?, 3, '{}', ?)`, b.ID, b.Status, created); err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range storetest.UncountedItems {
		if _, err := raw.ExecContext(ctx, `INSERT INTO replay_batch_items (batch_id, position, workflow_id, replay_id, original_outcome, replay_outcome, changed)
			VALUES (?, ?, ?, nullif(?, ''), ?, ?, ?)`, it.Batch, it.Position, it.WorkflowID, it.ReplayID, it.From, it.To, it.From != it.To); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open and migrate: %v", err)
	}
	defer db.Close()
	storetest.CheckCountedBatches(ctx, t, db)
}
