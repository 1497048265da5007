package workflow

import (
	"sync"

	"github.com/agentplane/agentplane/internal/audit"
)

// RequestRecord is the audit record of a request that started a workflow
// and waits for its end (a sync invoke), offered to the workflow's end: if
// the request is still waiting when the workflow finishes here, the record
// is written in the transaction that stores the end, and the request is
// answered without a transaction of its own for its record. Otherwise the
// request writes its record itself, as any request does.
type RequestRecord struct {
	build func(workflowID string) *audit.Record

	mu      sync.Mutex
	state   int
	settled chan struct{} // closed when a claim is settled
}

const (
	recordWaiting  = iota // the request waits; the record is not written
	recordClaimed         // the end is being stored with the record
	recordWritten         // stored with the end
	recordReleased        // the request answers on its own
)

// NewRequestRecord offers the record build returns for the workflow
// (called at most once, when the end claims it).
func NewRequestRecord(build func(workflowID string) *audit.Record) *RequestRecord {
	return &RequestRecord{build: build, settled: make(chan struct{})}
}

// claim takes the record for the end being stored, if the request still
// waits; settle must follow.
func (p *RequestRecord) claim(workflowID string) *audit.Record {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != recordWaiting {
		return nil
	}
	p.state = recordClaimed
	return p.build(workflowID)
}

// settle says whether the end was stored with the claimed record.
func (p *RequestRecord) settle(written bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != recordClaimed {
		return
	}
	p.state = recordWaiting
	if written {
		p.state = recordWritten
	}
	close(p.settled)
	p.settled = make(chan struct{})
}

// Release ends the offer as the request answers, and reports whether its
// record was written with the workflow's end (then the request must not
// write it again). A claim in progress is waited for.
func (p *RequestRecord) Release() (written bool) {
	for {
		p.mu.Lock()
		switch p.state {
		case recordWritten:
			p.mu.Unlock()
			return true
		case recordClaimed:
			ch := p.settled
			p.mu.Unlock()
			<-ch
			continue
		}
		p.state = recordReleased
		p.mu.Unlock()
		return false
	}
}
