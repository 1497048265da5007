package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// heartbeat keeps idle streams open through proxies.
const heartbeat = 15 * time.Second

// SSEWriter writes server-sent events, flushing each one.
type SSEWriter struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	rc   *http.ResponseController
	stop chan struct{}
	// done is closed when the heartbeat goroutine has returned.
	done chan struct{}
	// drain is closed when the server drains: the stream then ends with a
	// comment saying so and cancel ends the handler's context.
	drain  <-chan struct{}
	cancel context.CancelFunc
	// ended is set once the final comment is written: nothing follows it.
	ended bool
}

// errStreamEnded refuses an event after a drained stream's final comment.
var errStreamEnded = errors.New("the stream ended: the server is shutting down")

// StartSSE sends the stream's headers; after it there are no status codes,
// only events. The returned context ends when the request's does or when
// the server drains: an open stream would otherwise hold the shutdown for
// its whole grace period, so when drain closes it ends with a comment and the client
// reconnects, with Last-Event-ID, to a replica that is serving.
func StartSSE(w http.ResponseWriter, r *http.Request, drain <-chan struct{}) (*SSEWriter, context.Context) {
	ctx, cancel := context.WithCancel(r.Context())
	return beginSSE(w, heartbeat, drain, cancel), ctx
}

// startSSEBeating starts a stream with a heartbeat every interval that
// no drain ends.
func startSSEBeating(w http.ResponseWriter, interval time.Duration) *SSEWriter {
	return beginSSE(w, interval, nil, func() {})
}

func beginSSE(w http.ResponseWriter, interval time.Duration, drain <-chan struct{}, cancel context.CancelFunc) *SSEWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &SSEWriter{w: w, rc: http.NewResponseController(w), stop: make(chan struct{}), done: make(chan struct{}),
		drain: drain, cancel: cancel}
	s.rc.Flush()
	go s.beat(interval)
	return s
}

// send writes one event: its id, its one-line JSON data, a blank line.
func (s *SSEWriter) Send(id int, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errStreamEnded
	}
	if _, err := fmt.Fprintf(s.w, "id: %d\ndata: %s\n\n", id, data); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *SSEWriter) beat(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.drain:
			s.mu.Lock()
			fmt.Fprint(s.w, ": server shutting down\n\n")
			s.rc.Flush()
			s.ended = true
			s.mu.Unlock()
			s.cancel()
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
func (s *SSEWriter) Close() {
	close(s.stop)
	<-s.done
	s.cancel()
}
