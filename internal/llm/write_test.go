package llm

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
)

// writeCounter counts the writes made to a connection.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestRequestLeavesInOneWrite: a completion's request, its headers and its
// body, leaves in one write to the connection, in both wire formats. A body
// net/http cannot tell is in memory goes in a write after its headers', a
// second system call (and segment) for every completion.
func TestRequestLeavesInOneWrite(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := p.newServer(t, func(llmtest.Request) llmtest.Answer { return llmtest.Answer{Text: "done"} })
			c, err := NewClients(testOptions(t)).clientOf(testModel(p.name, srv))
			if err != nil {
				t.Fatal(err)
			}
			var writes atomic.Int64
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return writeCounter{Conn: conn, writes: &writes}, nil
			}}
			t.Cleanup(tr.CloseIdleConnections)
			c.http.Transport = tr
			const n = 3
			for range n {
				if _, err := c.Complete(t.Context(), conversation()); err != nil {
					t.Fatal(err)
				}
			}
			if got := writes.Load(); got != n {
				t.Errorf("%d completions took %d writes to their connection, want one each", n, got)
			}
		})
	}
}
