package replay

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
)

// failingFinish is a batch store that always hands out one batch and can
// never finish it.
type failingFinish struct {
	BatchStore
	claims atomic.Int32
}

func (s *failingFinish) ClaimBatch(context.Context, string, time.Time, time.Time) (*Batch, error) {
	s.claims.Add(1)
	return &Batch{ID: "rpb_1", Tenant: "acme", Target: "triage@1", Status: BatchRunning}, nil
}

func (s *failingFinish) RenewBatch(context.Context, string, string, time.Time) error { return nil }

func (s *failingFinish) FinishBatch(context.Context, string, string, string, time.Time) (bool, error) {
	return false, errors.New("database unreachable")
}

type noVersions struct{ agent.VersionStore }

func (noVersions) AgentVersion(context.Context, string, string, string) (*agent.Version, error) {
	return nil, errors.New("database unreachable")
}

// TestBatchRunnerWaitsAfterAFailedFinish checks that a batch the store
// cannot finish is claimed again after Poll, not in a tight loop.
func TestBatchRunnerWaitsAfterAFailedFinish(t *testing.T) {
	st := &failingFinish{}
	r := &BatchRunner{Service: &Service{Versions: noVersions{}}, Store: st, Owner: "me", Lease: time.Minute, Poll: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r.Run(ctx)
	if n := st.claims.Load(); n != 1 {
		t.Errorf("the batch was claimed %d times in 300 ms with Poll an hour, want once", n)
	}
}
