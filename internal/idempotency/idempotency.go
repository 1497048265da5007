// Package idempotency makes POST requests safe to retry: a request carrying an
// Idempotency-Key is executed once per (tenant, principal, method, path, key);
// repeats get the stored response, or attach to the workflow it started.
package idempotency

import (
	"context"
	"net/http"
	"time"
)

// Key identifies one idempotent request.
type Key struct {
	Tenant    string
	Principal string
	Method    string
	Path      string
	Key       string
}

// States of an entry.
const (
	Running  = "running"
	Complete = "complete"
)

// Entry is the stored state of an idempotent request.
type Entry struct {
	Key         Key
	Fingerprint string
	State       string
	// Response, once complete.
	Status int
	Header http.Header
	Body   []byte
	// WorkflowID is set only in entries stored before invoke keys moved to
	// their workflows (migration 0014): such a running entry is kept until
	// it expires, as it was then.
	WorkflowID string
	CreatedAt  time.Time
	// ExpiresAt is when the key stops being honoured.
	ExpiresAt time.Time
	// LockedUntil bounds how long a running entry blocks repeats; past it the
	// first request is presumed dead and a repeat may take over. It does not
	// bound an entry linked to a workflow: the workflow outlives the request
	// (and a crash), so repeats attach to it until the entry expires.
	LockedUntil time.Time
}

// Live reports whether e still blocks a new request for its key at time
// now: until it expires when complete or linked to a workflow, else until
// LockedUntil.
func (e Entry) Live(now time.Time) bool {
	if !now.Before(e.ExpiresAt) {
		return false
	}
	return e.State == Complete || e.WorkflowID != "" || now.Before(e.LockedUntil)
}

// Store keeps idempotency entries; it must be safe across replicas.
type Store interface {
	// BeginIdempotent inserts e as running unless a live entry for e.Key
	// exists (an expired one, or a running one past LockedUntil and linked to
	// no workflow, is replaced).
	// It returns the existing entry and false, or e and true.
	BeginIdempotent(ctx context.Context, e Entry) (Entry, bool, error)
	// CompleteIdempotent stores the response of a running entry.
	CompleteIdempotent(ctx context.Context, k Key, status int, header http.Header, body []byte) error
	// ReleaseIdempotent deletes a running entry whose response is not kept.
	ReleaseIdempotent(ctx context.Context, k Key) error
	// ExtendIdempotent moves a running entry's LockedUntil to until: the
	// request holding it is still alive. An entry no longer running (or
	// gone) is left as it is.
	ExtendIdempotent(ctx context.Context, k Key, until time.Time) error
	// PurgeIdempotency deletes entries that expired before t; it returns how many.
	PurgeIdempotency(ctx context.Context, t time.Time) (int64, error)
}
