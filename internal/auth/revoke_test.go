package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// revokedIDs is a revocation store whose list the test changes.
type revokedIDs struct {
	ids   []string
	err   error
	loads int
}

func (l *revokedIDs) RevokedClients(context.Context) ([]string, error) {
	l.loads++
	return l.ids, l.err
}

// clientVerifier accepts every token as a principal of the client it names.
type clientVerifier struct{}

func (clientVerifier) Verify(_ context.Context, raw string) (Principal, error) {
	return Principal{Subject: raw, ClientID: raw, Tenant: "acme"}, nil
}

func TestRevokingVerifierRefusesWithinTTL(t *testing.T) {
	if DefaultRevocationTTL > 30*time.Second || DefaultRevocationTTL <= 0 {
		t.Fatalf("DefaultRevocationTTL = %s: SPEC §4 bounds it at 30 s", DefaultRevocationTTL)
	}
	if v := NewRevokingVerifier(clientVerifier{}, &revokedIDs{}, 0, nil); v.TTL() != DefaultRevocationTTL {
		t.Errorf("ttl 0 gave %s, want the default %s", v.TTL(), DefaultRevocationTTL)
	}
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	list := &revokedIDs{}
	v := NewRevokingVerifier(clientVerifier{}, list, 5*time.Second, func() time.Time { return now })
	ctx := context.Background()

	if _, err := v.Verify(ctx, "cl_leaked"); err != nil {
		t.Fatalf("a client not revoked was refused: %v", err)
	}
	list.ids = []string{"cl_leaked"}
	now = now.Add(4 * time.Second)
	if _, err := v.Verify(ctx, "cl_leaked"); err != nil {
		t.Fatalf("the list was read again before its ttl: %v", err)
	}
	if list.loads != 1 {
		t.Errorf("loads within the ttl = %d, want 1", list.loads)
	}
	now = now.Add(time.Second)
	_, err := v.Verify(ctx, "cl_leaked")
	if !problem.Is(err, problem.Unauthenticated) {
		t.Fatalf("revoked client's token once the ttl passed: %v, want unauthenticated", err)
	}
	if _, err := v.Verify(ctx, "cl_other"); err != nil {
		t.Errorf("another client was refused: %v", err)
	}

	list.err = errors.New("database down")
	now = now.Add(5 * time.Second)
	if _, err := v.Verify(ctx, "cl_other"); !problem.Is(err, problem.Unavailable) {
		t.Errorf("a list that cannot be read: %v, want unavailable rather than trusting a stale list", err)
	}
}
