package httpapi

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// heartbeat keeps idle streams open through proxies.
const heartbeat = 15 * time.Second

// sseWriter writes server-sent events, flushing each one.
type sseWriter struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	rc   *http.ResponseController
	stop chan struct{}
	// done is closed when the heartbeat goroutine has returned.
	done chan struct{}
}

// startSSE sends the stream's headers; after it there are no status codes,
// only events.
func startSSE(w http.ResponseWriter) *sseWriter {
	return startSSEBeating(w, heartbeat)
}

// startSSEBeating is startSSE with a heartbeat every interval.
func startSSEBeating(w http.ResponseWriter, interval time.Duration) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), stop: make(chan struct{}), done: make(chan struct{})}
	s.rc.Flush()
	go s.beat(interval)
	return s
}

// send writes one event: its id, its one-line JSON data, a blank line.
func (s *sseWriter) send(id int, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.w, "id: %d\ndata: %s\n\n", id, data); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseWriter) beat(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			fmt.Fprint(s.w, ": keep-alive\n\n")
			s.rc.Flush()
			s.mu.Unlock()
		}
	}
}

// close stops the heartbeat and waits for it, so nothing is written to the
// response once close returns.
func (s *sseWriter) close() {
	close(s.stop)
	<-s.done
}
