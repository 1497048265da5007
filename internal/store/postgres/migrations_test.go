package postgres

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/migrate"
)

// TestStepsMigrationSetsSent upgrades a database holding steps recorded
// before migration 3, which added sent: only a tool step that ended ok or
// in error with a sign of its call was sent. completion is gone, and
// replays can be stored.
func TestStepsMigrationSetsSent(t *testing.T) {
	t.Parallel()
	url := NewTestDatabase(t)
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
	if _, err := migrate.Run(ctx, target{conn}, ms[:2]); err != nil {
		t.Fatal(err)
	}
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
