package main

import (
	"context"
	"fmt"
	"github.com/agentplane/agentplane/internal/catalogcache"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/httpapi"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/siem"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/impact"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// store is everything agentplane keeps, in SQLite or PostgreSQL.
type store interface {
	httpapi.Store
	tool.Store
	impact.Store
	model.Store
	agent.VersionStore
	workflow.Store
	replay.Store
	replay.BatchStore
	replay.DatasetStore
	schedule.Store
	webhook.Store
	rollout.Store
	retention.Store
	retention.WriteCounter
	auth.RevocationStore
	siem.Store
	redact.KeyStore
	catalogcache.Generations
	Close() error
}

// storeFlags are the flags of every command that touches the store.
type storeFlags struct {
	data        string
	databaseURL string
	maxConns    int32
	writers     int
}

func (f *storeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.data, "data", "./data", "data directory of the embedded SQLite store")
	fs.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL URL (postgres://…); replaces the embedded SQLite store so replicas can share it")
	fs.Int32Var(&f.maxConns, "database-max-conns", 0, fmt.Sprintf(
		"most PostgreSQL connections this process opens (default %d, or the URL's pool_max_conns); must exceed --database-writers", postgres.DefaultMaxConns))
	fs.IntVar(&f.writers, "database-writers", 0,
		"PostgreSQL write transactions this process runs at once, each committing a batch of queued writes (0: half the CPUs, at least 1)")
}

// open opens PostgreSQL when a database URL is set, else SQLite in the data directory.
func (f *storeFlags) open(ctx context.Context) (store, error) {
	if u := f.databaseURL; u != "" {
		if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
			return nil, fmt.Errorf("--database-url must be a postgres:// URL")
		}
		if f.maxConns < 0 || f.writers < 0 {
			return nil, fmt.Errorf("--database-max-conns and --database-writers must not be negative")
		}
		db, err := postgres.Open(ctx, u, postgres.WithMaxConns(f.maxConns), postgres.WithWriters(f.writers))
		if err != nil {
			return nil, fmt.Errorf("open PostgreSQL: %w", err)
		}
		return db, nil
	}
	db, err := sqlite.Open(ctx, filepath.Join(f.data, "agentplane.db"))
	if err != nil {
		return nil, fmt.Errorf("open SQLite in %s: %w", f.data, err)
	}
	return db, nil
}
