package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/internal/audit"
)

// appendOne appends one record for tenant through db.
func appendOne(ctx context.Context, db *DB, tenant string, i int) error {
	return db.AppendAudit(ctx, &audit.Record{Tenant: tenant, Actor: audit.Actor{Sub: "u"},
		Action: "test.append", Resource: audit.Resource{Type: "t", ID: fmt.Sprint(i)}, Outcome: audit.Success})
}

// known returns the head db knows for tenant.
func known(db *DB, tenant string) (head, bool) {
	db.heads.mu.Lock()
	defer db.heads.mu.Unlock()
	h, ok := db.heads.latest[tenant]
	return h, ok
}

// TestKnownHeadsSealInOneRoundTripAndYieldToOtherReplicas: a replica that
// wrote a tenant's last records seals the next ones on the head it knows;
// when another replica has moved the head meanwhile, the transaction is
// refused and runs again reading the head, and the tenant's appends read
// the head first for a while. Every chain verifies whichever replica and
// writer appended, and nothing is lost.
func TestKnownHeadsSealInOneRoundTripAndYieldToOtherReplicas(t *testing.T) {
	t.Parallel()
	url := NewTestDatabase(t)
	ctx := t.Context()
	open := func() *DB {
		db, err := Open(ctx, url, WithWriters(3))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()

	if err := appendOne(ctx, a, "acme", 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := known(a, "acme"); !ok {
		t.Fatal("after its append, replica a does not know acme's head")
	}
	// b moves the head a knows.
	if err := appendOne(ctx, b, "acme", 1); err != nil {
		t.Fatal(err)
	}
	if err := appendOne(ctx, a, "acme", 2); err != nil {
		t.Fatalf("append on a moved head: %v", err)
	}
	a.heads.mu.Lock()
	_, contended := a.heads.contended["acme"]
	a.heads.mu.Unlock()
	if !contended {
		t.Error("a head moved by another replica did not make the tenant contended")
	}

	// Both replicas, three writers each, on two shared tenants and one of
	// their own each.
	const each = 60
	var wg sync.WaitGroup
	errs := make(chan error, 4*each)
	for r, db := range []*DB{a, b} {
		for i := range each {
			for _, tenant := range []string{"acme", "globex", fmt.Sprint("own-", r)} {
				wg.Go(func() {
					if err := appendOne(ctx, db, tenant, i); err != nil {
						errs <- fmt.Errorf("replica %d, %s: %w", r, tenant, err)
					}
				})
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for tenant, want := range map[string]int64{"acme": 3 + 2*each, "globex": 2 * each, "own-0": each, "own-1": each} {
		rep, err := audit.Verify(ctx, a, tenant)
		if err != nil || !rep.OK || rep.RecordsChecked != want {
			t.Errorf("%s: %+v, %v; want a verified chain of %d records", tenant, rep, err, want)
		}
	}
}

// TestAFailedSealedTransactionForgetsItsHeads: a transaction sealed on
// known heads that fails for another reason leaves no head known that it
// did not write, so the next append reads the head and succeeds.
func TestAFailedSealedTransactionForgetsItsHeads(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := t.Context()
	if err := appendOne(ctx, db, "acme", 0); err != nil {
		t.Fatal(err)
	}
	rec := &audit.Record{Tenant: "acme", Actor: audit.Actor{Sub: "u"}, Action: "test.fail",
		Resource: audit.Resource{Type: "t"}, Outcome: audit.Success}
	db.prepareAudit(rec)
	err := db.write(ctx, func(tx *wtx) error {
		tx.Audit(rec)
		// Fails in SQL, with the COMMIT: after the records were sealed.
		tx.Queue(nil, `SELECT require_rows(0, 'refused')`)
		return nil
	})
	if err == nil {
		t.Fatal("a refused transaction committed")
	}
	if _, ok := known(db, "acme"); ok {
		t.Error("the refused transaction's head is still known")
	}
	if err := appendOne(ctx, db, "acme", 1); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(ctx, db, "acme")
	if err != nil || !rep.OK || rep.RecordsChecked != 2 {
		t.Errorf("%+v, %v; want a verified chain of 2 records", rep, err)
	}
}
