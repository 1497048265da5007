package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// toolService is the API the agent calls: reads of things and a write
// (an order) whose every arrival is kept by Idempotency-Key.
type toolService struct {
	*httptest.Server
	reads atomic.Int64
	bad   atomic.Bool

	mu     sync.Mutex
	orders map[string]int // Idempotency-Key → arrivals
	noKey  int            // orders that came without a key
}

const toolSpec = `{"openapi": "3.0.3", "info": {"title": "shop", "version": "1"},
 "servers": [{"url": "%s"}],
 "paths": {
  "/things/{id}": {"get": {"operationId": "getThing", "summary": "Read a thing",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok"}}}},
  "/orders": {"post": {"operationId": "createOrder", "summary": "Place an order",
   "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
   "responses": {"201": {"description": "created"}}}}}}`

const (
	agentName       = "harness-orders"
	agentDefinition = `{
  "tools": ["shop"],
  "steps": [
    {"action": "look", "call": "shop.getThing", "args": {"id": "'a'"}, "save_as": "a"},
    {"action": "order", "call": "shop.createOrder", "args": {"item": "'a'"}},
    {"action": "check", "call": "shop.getThing", "args": {"id": "'b'"}}
  ],
  "outcome": "'done'"
}`
)

func newToolService() *toolService {
	s := &toolService{orders: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *toolService) spec() string { return fmt.Sprintf(toolSpec, s.URL) }

// misbehave turns the stalls and the 500s on or off.
func (s *toolService) misbehave(on bool) { s.bad.Store(on) }

func (s *toolService) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/things/"):
		n := s.reads.Add(1)
		if s.bad.Load() {
			if n%10 == 0 {
				time.Sleep(time.Second)
			}
			if n%7 == 0 {
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprint(w, `{"error": "injected"}`)
				return
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/things/"), "ok": true})
	case r.Method == http.MethodPost && r.URL.Path == "/orders":
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		if key == "" {
			s.noKey++
		} else {
			s.orders[key]++
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"order": "o-1"}`)
	default:
		http.NotFound(w, r)
	}
}

// writes returns the orders received: distinct keys, re-sends with a key
// already seen, and orders without a key.
func (s *toolService) writes() (keys, resent, unkeyed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.orders {
		keys++
		resent += n - 1
	}
	return keys, resent, s.noKey
}
