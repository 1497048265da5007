package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", for seeding

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/workflow"
)

// tenant is the tenant of the benchmark's token (benchserver mints it).
const tenant = "bench"

// lister is the part of a store the benchmark times.
type lister interface {
	ListWorkflows(ctx context.Context, tenant string, f workflow.ListFilter) ([]*workflow.Workflow, error)
	ListWorkflowsPlan(ctx context.Context, tenant string, f workflow.ListFilter) ([]string, error)
}

// benchDB is the server's database opened a second time: through the store,
// to time its query, and raw, to seed it.
type benchDB struct {
	lister
	seedRows func(ctx context.Context, rows []row) error
	// afterSeed, when set, runs once the rows are in.
	afterSeed func(ctx context.Context) error
	close     []func() error
	ids       []string // seeded, oldest first
}

func (d *benchDB) Close() error {
	var err error
	for _, c := range d.close {
		if e := c(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// openStore opens the database of a server started on store.
func openStore(ctx context.Context, store, data, databaseURL string) (*benchDB, error) {
	if store == "postgres" {
		db, err := postgres.Open(ctx, databaseURL)
		if err != nil {
			return nil, err
		}
		conn, err := pgx.Connect(ctx, databaseURL)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &benchDB{lister: db, seedRows: func(ctx context.Context, rows []row) error { return copyRows(ctx, conn, rows) },
			afterSeed: func(ctx context.Context) error {
				_, err := conn.Exec(ctx, `ANALYZE workflows`) // as autovacuum would after a bulk load
				return err
			},
			close: []func() error{db.Close, func() error { return conn.Close(context.WithoutCancel(ctx)) }}}, nil
	}
	path := filepath.Join(data, "agentplane.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		db.Close()
		return nil, err
	}
	return &benchDB{lister: db, seedRows: func(ctx context.Context, rows []row) error { return insertRows(ctx, raw, rows) },
		close: []func() error{db.Close, raw.Close}}, nil
}

// row is one seeded workflow.
type row struct {
	id, agent, version, status, outcome, goal string
	context                                   json.RawMessage
	started, finished                         time.Time
}

var (
	agents  = []string{"triage", "billing", "payments-assistant", "fraud-review", "support"}
	verbs   = []string{"Check", "Review", "Summarise", "Route", "Answer", "Close", "Update", "Explain"}
	objects = []string{"invoice", "order", "ticket", "subscription", "payment", "account", "shipment", "card"}
	extras  = []string{"for a VIP customer", "before Friday", "after a duplicate charge", "in EUR", "from the EU store",
		"with a missing address", "marked urgent", "for the second time", "on a corporate plan", "placed online"}
)

// generate makes n workflows of tenant, one every 3 s ending now-ish,
// reproducibly: about a fifth of the goals are refunds, one in two hundred
// mentions a chargeback.
func generate(n int) []row {
	rng := rand.New(rand.NewPCG(17, 42))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]row, n)
	for i := range rows {
		start := base.Add(time.Duration(i) * 3 * time.Second)
		r := row{id: ids.NewAt(ids.Workflow, start), agent: agents[rng.IntN(len(agents))],
			version: fmt.Sprint(1 + rng.IntN(4)), started: start,
			context: json.RawMessage(fmt.Sprintf(`{"ticket": "T-%d", "amount": %d}`, i, rng.IntN(5000)))}
		verb := verbs[rng.IntN(len(verbs))]
		if rng.IntN(5) == 0 {
			verb = "Refund"
		}
		r.goal = fmt.Sprintf("%s %s %d of customer %d %s", verb, objects[rng.IntN(len(objects))], 10000+i, rng.IntN(20000), extras[rng.IntN(len(extras))])
		if rng.IntN(200) == 0 {
			r.goal += ", a chargeback is open"
		}
		switch p := rng.IntN(100); {
		case p < 2 && i > n-500:
			r.status = workflow.Running
		case p < 80:
			r.status, r.outcome = workflow.Completed, "routed"
		case p < 95:
			r.status, r.outcome = workflow.Failed, workflow.OutcomeFailed
		default:
			r.status, r.outcome = workflow.Failed, workflow.OutcomeTimedOut
		}
		if r.status != workflow.Running {
			r.finished = start.Add(time.Duration(200+rng.IntN(5000)) * time.Millisecond)
		}
		rows[i] = r
	}
	return rows
}

// seed stores n generated workflows of tenant.
func (d *benchDB) seed(ctx context.Context, tenant string, n int) error {
	rows := generate(n)
	for i := 0; i < len(rows); i += 1000 {
		if err := d.seedRows(ctx, rows[i:min(i+1000, len(rows))]); err != nil {
			return err
		}
	}
	if d.afterSeed != nil {
		if err := d.afterSeed(ctx); err != nil {
			return err
		}
	}
	d.ids = make([]string, len(rows))
	for i, r := range rows {
		d.ids[i] = r.id
	}
	return nil
}

const caller = `{"sub": "user-1", "client_id": "cli-1", "tenant": "` + tenant + `", "scopes": ["agents:invoke"]}`

// insertRows writes rows into SQLite's workflows in one transaction, as the
// store stores them (times as text, finished_at ” while running).
func insertRows(ctx context.Context, db *sql.DB, rows []row) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO workflows (id, tenant, agent, agent_version, status, outcome, goal, context,
		caller, max_tool_calls, replay_of, request_id, trace_id, started_at, finished_at, deadline, cancel_requested, owner, lease_until)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 10, '', ?, '', ?, ?, ?, 0, '', ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	text := func(t time.Time) string { return t.UTC().Format(audit.TimeFormat) }
	for _, r := range rows {
		finished := ""
		if !r.finished.IsZero() {
			finished = text(r.finished)
		}
		if _, err := stmt.ExecContext(ctx, r.id, tenant, r.agent, r.version, r.status, r.outcome, r.goal, string(r.context),
			caller, "req_"+r.id, text(r.started), finished, text(r.started.Add(5*time.Minute)), text(time.Time{})); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// copyRows writes rows into PostgreSQL's workflows with COPY.
func copyRows(ctx context.Context, conn *pgx.Conn, rows []row) error {
	cols := strings.Fields(`id tenant agent agent_version status outcome goal context caller max_tool_calls replay_of
		request_id trace_id started_at finished_at deadline cancel_requested owner lease_until`)
	_, err := conn.CopyFrom(ctx, pgx.Identifier{"workflows"}, cols, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := rows[i]
		var finished any
		if !r.finished.IsZero() {
			finished = r.finished
		}
		return []any{r.id, tenant, r.agent, r.version, r.status, r.outcome, r.goal, r.context, json.RawMessage(caller), 10, "",
			"req_" + r.id, "", r.started, finished, r.started.Add(5 * time.Minute), false, "", time.Time{}}, nil
	}))
	return err
}
