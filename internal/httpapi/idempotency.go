package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/idempotency"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// maxIdempotencyKey bounds the length of a key.
const maxIdempotencyKey = 255

// defaultRunningLock is how long a running request blocks repeats of its
// key without renewing its lock (Config.IdempotencyLock) before it is
// presumed dead (its process crashed) and a repeat may run instead.
const defaultRunningLock = 30 * time.Second

// storedHeaders are the response headers replayed with a stored response.
// Cache-Control keeps a repeat of an answer holding a secret (a webhook's)
// out of caches, as the first answer was.
var storedHeaders = []string{"Content-Type", "Location", "Workflow-Id", "Cache-Control"}

// idempotent runs h at most once per idempotency key (SPEC §5): a repeat of
// the same request gets the stored response with Idempotent-Replayed: true.
// (Invoke and real replays keep their keys with the workflows they create.)
func (s *Server) idempotent(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			h.ServeHTTP(w, r)
			return
		}
		body, err := frontdoor.ReadBody(r)
		if err != nil {
			frontdoor.WriteProblem(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if len(key) > maxIdempotencyKey {
			frontdoor.WriteProblem(w, r, problem.Field("Idempotency-Key", "must be at most %d characters", maxIdempotencyKey))
			return
		}
		s.runOnce(w, r, key, body, h)
	})
}

func (s *Server) runOnce(w http.ResponseWriter, r *http.Request, key string, body []byte, h http.Handler) {
	p := frontdoor.Principal(r)
	now := s.deps.Now()
	k := idempotency.Key{Tenant: p.Tenant, Principal: p.ID(), Method: r.Method, Path: r.URL.Path, Key: key}
	e, created, err := s.deps.Store.BeginIdempotent(r.Context(), idempotency.Entry{
		Key: k, Fingerprint: workflow.Fingerprint(body), State: idempotency.Running,
		CreatedAt: now, ExpiresAt: now.Add(s.cfg.IdempotencyTTL), LockedUntil: now.Add(s.cfg.IdempotencyLock),
	})
	if err != nil {
		frontdoor.WriteProblem(w, r, err)
		return
	}
	if !created {
		s.repeat(w, r, e, workflow.Fingerprint(body))
		return
	}
	info := frontdoor.InfoFrom(r.Context())
	rec := &recordingWriter{ResponseWriter: w}
	stop := s.keepLocked(r.Context(), k)
	h.ServeHTTP(rec, r)
	stop()
	// Detached from the request: a client gone away must not leave the key running.
	ctx := context.WithoutCancel(r.Context())
	if rec.Started() && storable(rec.status) && !rec.overflow {
		hdr := http.Header{}
		for _, name := range storedHeaders {
			if v := w.Header().Get(name); v != "" {
				hdr.Set(name, v)
			}
		}
		err = s.deps.Store.CompleteIdempotent(ctx, k, rec.status, hdr, rec.body.Bytes())
	} else {
		err = s.deps.Store.ReleaseIdempotent(ctx, k)
	}
	if err != nil {
		s.deps.Logger.Error("idempotency key not settled", "request_id", info.RequestID, "err", err)
	}
}

// keepLocked renews the lock of k's running entry every third of
// Config.IdempotencyLock until stop is called, and returns once no renewal
// is in flight: a request alive on a slow handler keeps its key, one whose
// process died lets it lapse within the lock's length.
func (s *Server) keepLocked(ctx context.Context, k idempotency.Key) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(exited)
		tick := time.NewTicker(s.cfg.IdempotencyLock / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rctx, cancel := context.WithTimeout(ctx, s.cfg.IdempotencyLock/3)
			err := s.deps.Store.ExtendIdempotent(rctx, k, s.deps.Now().Add(s.cfg.IdempotencyLock))
			cancel()
			if err != nil {
				s.deps.Logger.Warn("idempotency key lock not renewed", "request_id", frontdoor.InfoFrom(ctx).RequestID, "err", err)
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// repeat answers a request whose key was seen before.
func (s *Server) repeat(w http.ResponseWriter, r *http.Request, e idempotency.Entry, fp string) {
	switch {
	case e.Fingerprint != fp:
		frontdoor.WriteProblem(w, r, problem.New(problem.IdempotencyKeyReused,
			"this Idempotency-Key was used with a different request; use a new key for a new request"))
	case e.State != idempotency.Complete:
		frontdoor.WriteProblem(w, r, &problem.Error{Code: problem.IdempotencyKeyInUse, RetryAfter: time.Second,
			Detail: "a request with this Idempotency-Key is still executing"})
	default:
		for name, vs := range e.Header {
			for _, v := range vs {
				w.Header().Add(name, v)
			}
		}
		w.Header().Set("Idempotent-Replayed", "true")
		info := frontdoor.InfoFrom(r.Context())
		info.Details = map[string]any{"idempotent_replayed": true}
		info.WorkflowID = e.WorkflowID // "" unless the first request started one
		w.WriteHeader(e.Status)
		w.Write(e.Body)
	}
}

// storable reports whether a response is kept for repeats (SPEC §5).
func storable(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return status < 500
}

// maxStoredResponse bounds the response body kept for repeats.
const maxStoredResponse = 4 << 20

// recordingWriter passes a response through while keeping a copy.
type recordingWriter struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	overflow bool
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len()+len(b) > maxStoredResponse {
		w.overflow = true
	} else {
		w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recordingWriter) Started() bool { return w.status != 0 }
