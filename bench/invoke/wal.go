package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// walProbe reads PostgreSQL's write-ahead log counters around a level, so
// the table can show what each workflow costs the database's log.
// pg_stat_wal counts the whole cluster: on a shared server, other
// databases' writes meanwhile are counted too.
type walProbe struct {
	conn   *pgx.Conn
	detail bool
}

// walCount is pg_stat_wal's counters and the insert position at one moment.
type walCount struct {
	records, fpi, bytes int64
	lsn                 string
}

// openWALProbe connects to the server at adminURL. With detail, it creates
// pg_walinspect (in the admin database) to break records down by kind.
func openWALProbe(ctx context.Context, adminURL string, detail bool) (*walProbe, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect for WAL counters: %w", err)
	}
	if detail {
		if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("-wal-detail needs pg_walinspect (PostgreSQL 15+, a superuser): %w", err)
		}
	}
	return &walProbe{conn: conn, detail: detail}, nil
}

func (p *walProbe) Close() { p.conn.Close(context.Background()) }

func (p *walProbe) read(ctx context.Context) (walCount, error) {
	var c walCount
	err := p.conn.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::bigint, pg_current_wal_insert_lsn()::text
		FROM pg_stat_wal`).Scan(&c.records, &c.fpi, &c.bytes, &c.lsn)
	if err != nil {
		return c, fmt.Errorf("read pg_stat_wal: %w", err)
	}
	return c, nil
}

// walKind is one row of the breakdown: a kind of record and its count.
type walKind struct {
	kind  string
	count int64
	bytes int64
}

// breakdown returns the records between two positions by resource manager
// and record type, most frequent first.
func (p *walProbe) breakdown(ctx context.Context, from, to string) ([]walKind, error) {
	rows, err := p.conn.Query(ctx, `SELECT "resource_manager/record_type", count, record_size + fpi_size
		FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) WHERE count > 0 ORDER BY count DESC LIMIT 20`, from, to)
	if err != nil {
		return nil, fmt.Errorf("pg_get_wal_stats: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (walKind, error) {
		var k walKind
		err := row.Scan(&k.kind, &k.count, &k.bytes)
		return k, err
	})
}

// walResult is one level's log cost.
type walResult struct {
	records, fpi, bytes int64
	kinds               []walKind
}

// printWALDetail prints each level's breakdown per workflow.
func printWALDetail(w io.Writer, rs []levelResult) {
	for _, r := range rs {
		if r.wal == nil || len(r.wal.kinds) == 0 || r.count == 0 {
			continue
		}
		fmt.Fprintf(w, "\nWAL records per workflow at concurrency %d, by kind:\n", r.concurrency)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "kind\trecords/wf\tbytes/wf\t")
		for _, k := range r.wal.kinds {
			fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t\n", k.kind, float64(k.count)/float64(r.count), float64(k.bytes)/float64(r.count))
		}
		tw.Flush()
	}
}
