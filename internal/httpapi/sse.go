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
}

// startSSE sends the stream's headers; after it there are no status codes,
// only events.
func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), stop: make(chan struct{})}
	s.rc.Flush()
	go s.beat()
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

func (s *sseWriter) beat() {
	t := time.NewTicker(heartbeat)
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

func (s *sseWriter) close() { close(s.stop) }
