package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/migrate"
	"github.com/agentplane/agentplane/internal/store/storetest"
)

// TestStepsMigrationSetsSent upgrades a database holding steps recorded
// before migration 3, which added sent: only a tool step that ended ok or
// in error with a sign of its call was sent. completion is gone, and
// replays can be stored.
func TestStepsMigrationSetsSent(t *testing.T) {
	t.Parallel()
	url := NewTestDatabase(t)
	ctx := t.Context()
	conn := migratedBefore(t, url, "replays")
	steps := []struct {
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
	for i, s := range steps {
		if _, err := conn.Exec(ctx, `INSERT INTO workflow_steps (workflow_id, seq, step, action, kind,
			status, tool, operation, args, score, queue, outcome, result, error, request, http_status, attempts,
			started_at, duration_ms, completion)
			VALUES ('wf_1', $1, $1, $2, 'call', $3, $4, 'listPets', NULL, NULL, '', '', NULL, '', $5, $6, $7, $8, 5, '{}')`,
			i+1, s.name, s.status, s.tool, s.request, s.http, s.attempts, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)

	db, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("open and migrate: %v", err)
	}
	defer db.Close()
	got, err := db.Steps(ctx, "wf_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantSent, gotSent := map[string]bool{}, map[string]bool{}
	for _, s := range steps {
		wantSent[s.name] = s.sent
	}
	for _, s := range got {
		gotSent[s.Action] = s.Sent
	}
	if diff := cmp.Diff(wantSent, gotSent); diff != "" {
		t.Errorf("sent by step (-want +got):\n%s", diff)
	}
	var n int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'workflow_steps' AND column_name = 'completion'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("completion columns = %d, %v; want none", n, err)
	}
	r := &replay.Replay{ID: "rpl_1", Tenant: "acme", WorkflowID: "wf_1", Target: "triage@2"}
	if err := db.CreateReplay(ctx, r, nil); err != nil {
		t.Fatalf("create replay: %v", err)
	}
	if _, err := db.Replay(ctx, "acme", "rpl_1"); err != nil {
		t.Errorf("read replay: %v", err)
	}
}

// migratedBefore empties the database at url, migrates it up to, not
// including, the migration named name, and returns a connection to it.
func migratedBefore(t *testing.T, url, name string) *pgx.Conn {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	// Start from an empty database, not the migrated clone.
	if _, err := conn.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
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
	if _, err := migrate.Run(ctx, target{conn}, ms[:n]); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestBatchCountersMigrationCountsStoredBatches upgrades a database holding
// batches stored before the batch counters: each batch counts its replayed
// items and those whose outcome changed, and reads as it did.
func TestBatchCountersMigrationCountsStoredBatches(t *testing.T) {
	t.Parallel()
	url := NewTestDatabase(t)
	ctx := t.Context()
	conn := migratedBefore(t, url, "batch_counters")
	for _, b := range storetest.UncountedBatches {
		if _, err := conn.Exec(ctx, `INSERT INTO replay_batches (id, tenant, target, status, total, creator, created_at)
			VALUES ($1, 'acme', 'triage@2', $2, 3, '{}', now())`, b.ID, b.Status); err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range storetest.UncountedItems {
		if _, err := conn.Exec(ctx, `INSERT INTO replay_batch_items (batch_id, position, workflow_id, replay_id, original_outcome, replay_outcome, changed)
			VALUES ($1, $2, $3, nullif($4, ''), $5, $6, $7)`, it.Batch, it.Position, it.WorkflowID, it.ReplayID, it.From, it.To, it.From != it.To); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)

	db, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("open and migrate: %v", err)
	}
	defer db.Close()
	storetest.CheckCountedBatches(ctx, t, db)
}
