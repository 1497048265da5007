package workflow

import (
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
)

func offer() *RequestRecord {
	return NewRequestRecord(func(id string) *audit.Record { return &audit.Record{WorkflowID: id} })
}

// TestRequestRecordIsWrittenOnce walks the offer of a request's record
// through each way it can end: written with the end, refused by a request
// that stopped waiting, or handed back by an end that failed to store.
func TestRequestRecordIsWrittenOnce(t *testing.T) {
	t.Run("written with the end", func(t *testing.T) {
		p := offer()
		if rec := p.claim("wf_1"); rec == nil || rec.WorkflowID != "wf_1" {
			t.Fatalf("claim while waiting: %+v", rec)
		}
		p.settle(true)
		if !p.Release() {
			t.Error("Release after the end stored the record: false, want true")
		}
	})
	t.Run("the request stopped waiting first", func(t *testing.T) {
		p := offer()
		if p.Release() {
			t.Error("Release before any claim: true, want false")
		}
		if rec := p.claim("wf_1"); rec != nil {
			t.Errorf("claim after the request answered: %+v, want none", rec)
		}
	})
	t.Run("the end failed to store", func(t *testing.T) {
		p := offer()
		p.claim("wf_1")
		p.settle(false)
		if p.Release() {
			t.Error("Release after a failed end: true, want false (the request writes its own)")
		}
	})
	t.Run("Release waits for a claim in progress", func(t *testing.T) {
		p := offer()
		p.claim("wf_1")
		got := make(chan bool)
		go func() { got <- p.Release() }()
		select {
		case w := <-got:
			t.Fatalf("Release returned %v while the end was being stored", w)
		case <-time.After(50 * time.Millisecond):
		}
		p.settle(true)
		if !<-got {
			t.Error("Release after the claim settled as written: false, want true")
		}
	})
	t.Run("no offer", func(t *testing.T) {
		var p *RequestRecord
		if rec := p.claim("wf_1"); rec != nil {
			t.Errorf("claim of no offer: %+v", rec)
		}
	})
}
