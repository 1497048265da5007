// Command engines compares operation search in the process (tool.SearchIndex,
// what agentplane uses on both stores) with the full-text search of the two
// databases, SQLite FTS5 and PostgreSQL's tsvector, over the four real
// documents of internal/realdocs and the relevance test set of
// internal/tool/relevance:
//
//	go run ./bench/search/engines [-rounds 20] [-postgres URL]
//
// Each database engine is measured twice:
//
//   - "as written": the operation's id, summary, path and description as
//     they are, with the engine's own tokenizer and English stemming
//     (FTS5's porter over unicode61, PostgreSQL's english configuration);
//   - "our words": every field first split into agentplane's search terms
//     (identifiers split on case and punctuation, stemmed, stop words out),
//     so the engine differs from the in-process index only in its ranking.
//
// Queries are the words of the query OR'ed, ranked by the engine's BM25
// (FTS5) or ts_rank (PostgreSQL) with the in-process index's field weights,
// filtered to the document's operations. The table gives recall@5, the
// share of queries with the meant operation first, latency p50 and p99 over
// every query of every round (from the query text to the ranked ids,
// database round trip included), and the memory the index holds per
// operation: the heap kept after a GC, FTS5's tables' pages, PostgreSQL's
// table and GIN index (pg_total_relation_size). PostgreSQL is skipped when
// -postgres is empty; its tables are temporary, in the database named.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/relevance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rounds := flag.Int("rounds", 20, "times each query is run for the latency figures")
	pgURL := flag.String("postgres", os.Getenv("AGENTPLANE_TEST_DATABASE_URL"), "PostgreSQL URL for the tsvector engine; empty skips it")
	flag.Parse()
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "bench/search/engines: -rounds must be at least 1")
		os.Exit(2)
	}
	if err := run(ctx, *rounds, *pgURL); err != nil {
		fmt.Fprintln(os.Stderr, "bench/search/engines:", err)
		os.Exit(1)
	}
}

// doc is one document's operations as the engines index them.
type doc struct {
	name string
	ops  []tool.Operation
}

// engine answers a document's queries with operation ids, best first.
type engine struct {
	name   string
	search func(ctx context.Context, doc, q string) ([]string, error)
	// bytes is the memory its index holds.
	bytes int64
	close func()
}

func run(ctx context.Context, rounds int, pgURL string) error {
	var docs []doc
	total := 0
	for _, d := range realdocs.All {
		fmt.Fprintf(os.Stderr, "importing %s …\n", d.Name)
		spec, err := relevance.Import(ctx, d)
		if err != nil {
			return err
		}
		slices.SortFunc(spec.Operations, func(a, b tool.Operation) int { return cmp.Compare(a.ID, b.ID) })
		docs = append(docs, doc{d.Name, spec.Operations})
		total += len(spec.Operations)
	}
	builders := []func(context.Context, []doc) (*engine, error){
		inProcess,
		func(ctx context.Context, docs []doc) (*engine, error) { return fts5(ctx, docs, false) },
		func(ctx context.Context, docs []doc) (*engine, error) { return fts5(ctx, docs, true) },
	}
	if pgURL != "" {
		builders = append(builders,
			func(ctx context.Context, docs []doc) (*engine, error) { return tsvector(ctx, pgURL, docs, false) },
			func(ctx context.Context, docs []doc) (*engine, error) { return tsvector(ctx, pgURL, docs, true) })
	} else {
		fmt.Fprintln(os.Stderr, "-postgres is empty (or AGENTPLANE_TEST_DATABASE_URL unset): PostgreSQL is skipped")
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\trecall@5\tfirst\tp50\tp99\tbuild\tB/operation\t")
	var score relevance.Score
	for _, build := range builders {
		began := time.Now()
		e, err := build(ctx, docs)
		if err != nil {
			return err
		}
		built := time.Since(began)
		fmt.Fprintf(os.Stderr, "measuring %s …\n", e.name)
		var lat []time.Duration
		score, lat, err = measure(ctx, e, docs, rounds)
		e.close()
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%s\t%s\t%s\t%d\t\n", e.name, score.Recall(), score.FirstRate(),
			round(lat[len(lat)/2]), round(lat[len(lat)*99/100]), built.Round(time.Millisecond), e.bytes/int64(total))
	}
	fmt.Fprintf(tw, "(%d operations, %d queries × %d rounds)\t\t\t\t\t\t\t\n", total, score.Queries, rounds)
	return tw.Flush()
}

// measure scores e on every document's queries, then times each query
// rounds times and returns the latencies sorted.
func measure(ctx context.Context, e *engine, docs []doc, rounds int) (relevance.Score, []time.Duration, error) {
	var score relevance.Score
	var searchErr error
	for _, d := range docs {
		score = score.Add(relevance.Rank(d.name, func(q string) []string {
			ids, err := e.search(ctx, d.name, q)
			if err != nil && searchErr == nil {
				searchErr = err
			}
			return ids
		}))
	}
	if searchErr != nil {
		return score, nil, searchErr
	}
	var lat []time.Duration
	for range rounds {
		for _, d := range docs {
			for _, q := range relevance.Queries[d.name] {
				t := time.Now()
				if _, err := e.search(ctx, d.name, q.Q); err != nil {
					return score, nil, err
				}
				lat = append(lat, time.Since(t))
			}
		}
	}
	slices.Sort(lat)
	return score, lat, nil
}

func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(10 * time.Microsecond)
}

// inProcess is agentplane's own index, one per document as one per tool.
func inProcess(_ context.Context, docs []doc) (*engine, error) {
	before := heapAlloc()
	search := make(map[string]func(string) []string, len(docs))
	for _, d := range docs {
		search[d.name] = relevance.IDs(tool.NewSearchIndex(d.name, d.ops))
	}
	kept := heapAlloc() - before
	return &engine{
		name:   "in process (tool.SearchIndex)",
		search: func(_ context.Context, doc, q string) ([]string, error) { return search[doc](q), nil },
		bytes:  kept,
		close:  func() { runtime.KeepAlive(search) },
	}, nil
}

func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// fields are an operation's indexed texts, in the order of the weights.
func fields(op *tool.Operation, ourWords bool) [4]string {
	f := [4]string{op.ID, op.Summary, tool.PathText(op), op.Description}
	if ourWords {
		for i := range f {
			f[i] = strings.Join(tool.Terms(f[i]), " ")
		}
	}
	return f
}

// queryWords are the words of a query an engine is given.
func queryWords(q string, ourWords bool) []string {
	if ourWords {
		return tool.Terms(q)
	}
	return strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	})
}

// anyWord is an engine's query for any of q's words: each quoted with
// quote, joined by or.
func anyWord(q string, ourWords bool, quote, or string) string {
	words := queryWords(q, ourWords)
	for i, w := range words {
		words[i] = quote + w + quote
	}
	return strings.Join(words, or)
}

func variant(ourWords bool) string {
	if ourWords {
		return "our words"
	}
	return "as written"
}

// fts5 is SQLite's FTS5 over a database file of its own, whose size is
// what the index holds.
func fts5(ctx context.Context, docs []doc, ourWords bool) (*engine, error) {
	dir, err := os.MkdirTemp("", "agentplane-engines-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "fts.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	fail := func(err error) (*engine, error) {
		db.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	tokenize := "porter unicode61"
	if ourWords {
		tokenize = "unicode61"
	}
	if _, err := db.ExecContext(ctx, `CREATE VIRTUAL TABLE ops USING fts5(doc UNINDEXED, op UNINDEXED, id, summary, path, description, tokenize = '`+tokenize+`')`); err != nil {
		return fail(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	for _, d := range docs {
		for i := range d.ops {
			f := fields(&d.ops[i], ourWords)
			if _, err := tx.ExecContext(ctx, `INSERT INTO ops VALUES (?, ?, ?, ?, ?, ?)`, d.name, d.ops[i].ID, f[0], f[1], f[2], f[3]); err != nil {
				tx.Rollback()
				return fail(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO ops(ops) VALUES ('optimize')`); err != nil {
		return fail(err)
	}
	// The index is every FTS5 table but the content one, which holds the
	// texts themselves (the operations' own rows hold them already).
	var pages, pageSize int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM dbstat WHERE name IN ('ops_data', 'ops_idx', 'ops_docsize', 'ops_config')`).Scan(&pages); err != nil {
		return fail(fmt.Errorf("dbstat: %w", err))
	}
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return fail(err)
	}
	stmt, err := db.PrepareContext(ctx, `SELECT op FROM ops WHERE ops MATCH ? AND doc = ? ORDER BY bm25(ops, 0, 0, 4.0, 2.5, 1.5, 1.0) LIMIT 5`)
	if err != nil {
		return fail(err)
	}
	return &engine{
		name: "SQLite FTS5, " + variant(ourWords),
		search: func(ctx context.Context, doc, q string) ([]string, error) {
			match := anyWord(q, ourWords, `"`, " OR ")
			if match == "" {
				return nil, nil
			}
			return collect(stmt.QueryContext(ctx, "{id summary path description}: ("+match+")", doc))
		},
		bytes: pages * pageSize,
		close: func() { stmt.Close(); db.Close(); os.RemoveAll(dir) },
	}, nil
}

func collect(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// tsvector is PostgreSQL's full-text search: a temporary table with a
// weighted tsvector column and a GIN index on it, over one connection.
func tsvector(ctx context.Context, url string, docs []doc, ourWords bool) (*engine, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	fail := func(err error) (*engine, error) {
		conn.Close(ctx)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	config := "english"
	if ourWords {
		config = "simple"
	}
	if _, err := conn.Exec(ctx, `CREATE TEMPORARY TABLE search_ops (doc text NOT NULL, op text NOT NULL, tsv tsvector NOT NULL)`); err != nil {
		return fail(err)
	}
	rows := make([][]any, 0)
	for _, d := range docs {
		for i := range d.ops {
			f := fields(&d.ops[i], ourWords)
			rows = append(rows, []any{d.name, d.ops[i].ID, f[0], f[1], f[2], f[3]})
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TEMPORARY TABLE search_src (doc text, op text, id text, summary text, path text, description text)`); err != nil {
		return fail(err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"search_src"}, []string{"doc", "op", "id", "summary", "path", "description"}, pgx.CopyFromRows(rows)); err != nil {
		return fail(err)
	}
	cfg := "'" + config + "'"
	if _, err := conn.Exec(ctx, `INSERT INTO search_ops SELECT doc, op,
		setweight(to_tsvector(`+cfg+`, id), 'A') || setweight(to_tsvector(`+cfg+`, summary), 'B') ||
		setweight(to_tsvector(`+cfg+`, path), 'C') || setweight(to_tsvector(`+cfg+`, description), 'D')
		FROM search_src`); err != nil {
		return fail(err)
	}
	if _, err := conn.Exec(ctx, `DROP TABLE search_src`); err != nil {
		return fail(err)
	}
	if _, err := conn.Exec(ctx, `CREATE INDEX ON search_ops USING gin (tsv)`); err != nil {
		return fail(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE search_ops`); err != nil {
		return fail(err)
	}
	var size int64
	if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size('search_ops')`).Scan(&size); err != nil {
		return fail(err)
	}
	// ts_rank's weights are {D, C, B, A}: the in-process index's
	// description, path, summary and id weights, scaled to at most 1.
	const query = `SELECT op FROM search_ops WHERE doc = $1 AND tsv @@ to_tsquery($3::regconfig, $2)
		ORDER BY ts_rank('{0.25, 0.375, 0.625, 1.0}', tsv, to_tsquery($3::regconfig, $2)) DESC, op LIMIT 5`
	return &engine{
		name: "PostgreSQL tsvector, " + variant(ourWords),
		search: func(ctx context.Context, doc, q string) ([]string, error) {
			match := anyWord(q, ourWords, "'", " | ")
			if match == "" {
				return nil, nil
			}
			rows, err := conn.Query(ctx, query, doc, match, config)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
		bytes: size,
		close: func() { conn.Close(context.Background()) },
	}, nil
}
