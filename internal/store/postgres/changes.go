package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/workflow"
)

var _ workflow.ChangeFeed = (*DB)(nil)

// changesChannel is the NOTIFY channel replicas tell each other on. A
// payload is "<origin> <kind> [id …]": origin names the DB handle that
// wrote (a replica skips its own), kind is one of the change kinds below.
const changesChannel = "agentplane_changes"

const (
	changeChanged   = "changed"   // workflows' histories grew or they ended
	changeCancelled = "cancelled" // workflows someone asked to cancel
	changeReleased  = "released"  // a replica gave its workflows up
)

// maxPayload keeps a payload under NOTIFY's 8000-byte limit.
const maxPayload = 7900

// Timings of the listening connection.
const (
	listenIdle       = 30 * time.Second // a quiet connection is pinged after this
	listenPing       = 5 * time.Second  // and must answer within this
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// newOrigin names a DB handle in the payloads it sends.
func newOrigin() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// payloads are kind's notifications for ids, each within maxPayload.
func payloads(origin, kind string, ids []string) []string {
	var out []string
	cur := origin + " " + kind
	n := 0
	for _, id := range ids {
		if n > 0 && len(cur)+1+len(id) > maxPayload {
			out = append(out, cur)
			cur, n = origin+" "+kind, 0
		}
		cur += " " + id
		n++
	}
	return append(out, cur)
}

// notify records that the transaction changed ids in the way kind says;
// the notifications are sent with the commit (PostgreSQL delivers them only
// if it commits).
func (t *wtx) notify(kind string, ids ...string) {
	if t.notes == nil {
		t.notes = map[string][]string{}
	}
	t.notes[kind] = append(t.notes[kind], ids...)
}

// queueNotes queues the transaction's notifications.
func (t *wtx) queueNotes() {
	for _, kind := range []string{changeChanged, changeCancelled} {
		if ids := t.notes[kind]; len(ids) > 0 {
			for _, p := range payloads(t.origin, kind, ids) {
				t.Queue(wrapErr("notify"), `SELECT pg_notify('`+changesChannel+`', $1)`, p)
			}
		}
	}
}

// WatchChanges listens for the notifications other replicas' writes send,
// on a connection of its own, reconnecting with backoff when it fails
// (the database restarted, the network dropped): w.Live says when it is
// listening and when it stopped.
func (db *DB) WatchChanges(ctx context.Context, w workflow.Watch) error {
	backoff := listenBackoffMin
	for {
		// A failed connection is tried again; followers poll meanwhile.
		listening, _ := db.listen(ctx, w)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if listening {
			if w.Live != nil {
				w.Live(false)
			}
			backoff = listenBackoffMin
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, listenBackoffMax)
	}
}

// listen connects, listens and dispatches until the connection fails or
// ctx ends; listening says whether it got as far as listening.
func (db *DB) listen(ctx context.Context, w workflow.Watch) (listening bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listenPing)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+changesChannel); err != nil {
		return false, err
	}
	if w.Live != nil {
		w.Live(true)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			db.dispatch(n.Payload, w)
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Quiet: make sure the connection is still there.
			pctx, cancel := context.WithTimeout(ctx, listenPing)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return true, fmt.Errorf("ping the listening connection: %w", err)
			}
		default:
			return true, err
		}
	}
}

// dispatch hands one notification to w, unless this handle sent it.
func (db *DB) dispatch(payload string, w workflow.Watch) {
	f := strings.Fields(payload)
	if len(f) < 2 || f[0] == db.origin {
		return
	}
	switch ids := f[2:]; f[1] {
	case changeChanged:
		if w.Changed != nil {
			w.Changed(ids)
		}
	case changeCancelled:
		if w.Cancelled != nil {
			w.Cancelled(ids)
		}
	case changeReleased:
		if w.Released != nil {
			w.Released()
		}
	}
}
