package frontdoor

import (
	"net/http"
	"testing"
	"time"
)

// blockingWriter is a response whose writes wait for release; entered is
// signalled when a write begins.
type blockingWriter struct {
	header  http.Header
	entered chan struct{}
	release chan struct{}
	writes  int
}

func (w *blockingWriter) Header() http.Header { return w.header }
func (w *blockingWriter) WriteHeader(int)     {}

func (w *blockingWriter) Write(b []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	w.writes++
	return len(b), nil
}

func TestSSECloseWaitsForTheHeartbeat(t *testing.T) {
	w := &blockingWriter{header: http.Header{}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	sse := startSSEBeating(w, time.Millisecond)
	<-w.entered // a heartbeat is being written

	closed := make(chan struct{})
	go func() {
		sse.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("close returned while a heartbeat was being written")
	case <-time.After(100 * time.Millisecond):
	}
	close(w.release)
	<-closed
	// The heartbeat's goroutine, the only writer besides send, has returned.
	select {
	case <-sse.done:
	default:
		t.Fatal("close returned before the heartbeat's goroutine")
	}
	// Read without a lock: the heartbeat is over (the race detector checks).
	if w.writes == 0 {
		t.Fatal("the heartbeat close waited for was not written")
	}
}
