package scripted

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

// World is a server whose server-wide model is the scripted model, with
// the things service registered as the tool svc.
type World struct {
	Model  *Model
	Things *Things
	Server *benchserver.Server
	// DebugAddr is the server's --debug-addr (pprof).
	DebugAddr string
	// ModelConns counts the model server's connections.
	ModelConns *Conns
}

// Conns counts a server's connections: those open now, the most open at
// once since ResetPeak, and all accepted.
type Conns struct {
	mu                   sync.Mutex
	open, peak, accepted int
}

// track is an http.Server's ConnState hook.
func (c *Conns) track(_ net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case http.StateNew:
		c.open++
		c.accepted++
		c.peak = max(c.peak, c.open)
	case http.StateClosed, http.StateHijacked:
		c.open--
	}
}

// ResetPeak starts the peak and the count of accepted connections again
// from those open now.
func (c *Conns) ResetPeak() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peak, c.accepted = c.open, 0
}

// Peak is the most connections open at once since ResetPeak, and how many
// were accepted.
func (c *Conns) Peak() (peak, accepted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak, c.accepted
}

// Start starts the model (answering after latency; with h2c, speaking
// unencrypted HTTP/2 only, and the server asked to speak it with
// --llm-http2-prior-knowledge) and the things service on loopback, then a
// server of bin on store (data is its directory, adminURL the PostgreSQL
// server of a "postgres" store) that runs up to n workflows at once, mints
// its token of scopes and registers svc. stop stops them all.
func Start(ctx context.Context, bin, data, store, adminURL string, n int, latency time.Duration, h2c bool, scopes string) (w *World, stop func() error, err error) {
	w = &World{Model: NewModel(latency), Things: NewThings(), ModelConns: &Conns{}}
	svc := httptest.NewServer(w.Things)
	modelSrv := httptest.NewUnstartedServer(w.Model)
	modelSrv.Config.MaxHeaderBytes = 1 << 16
	modelSrv.Config.ConnState = w.ModelConns.track
	if h2c {
		// HTTP/2 with prior knowledge only, with Go's default limit of
		// streams on a connection (250).
		modelSrv.Config.Protocols = new(http.Protocols)
		modelSrv.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	modelSrv.Start()
	stopServices := func() { modelSrv.Close(); svc.Close() }
	if w.DebugAddr, err = benchserver.FreeAddr(); err != nil {
		stopServices()
		return nil, nil, err
	}
	sc := benchserver.Config{Binary: bin, Data: data, Args: []string{
		"--debug-addr", w.DebugAddr, "--allow-private-networks",
		"--max-running", strconv.Itoa(n), "--rate-limit", "1000000", "--rate-limit-burst", "1000000",
		"--llm-base-url", modelSrv.URL + "/v1", "--llm-model", "scripted", "--workflow-timeout", "10m",
	}}
	if h2c {
		sc.Args = append(sc.Args, "--llm-http2-prior-knowledge")
	}
	srv, stopServer, err := benchserver.StartOn(ctx, sc, store, adminURL)
	if err != nil {
		stopServices()
		return nil, nil, err
	}
	w.Server = srv
	stop = func() error {
		err := stopServer()
		stopServices()
		return err
	}
	if err := srv.MintToken(ctx, scopes); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": fmt.Sprintf(ThingSpec, svc.URL)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return nil, nil, errors.Join(fmt.Errorf("register tool: %d %s %v", st, body, err), stop())
	}
	return w, stop, nil
}
