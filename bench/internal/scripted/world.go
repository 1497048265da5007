package scripted

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
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
}

// Start starts the model (answering after latency) and the things service
// on loopback, then a server of bin on store (data is its directory,
// adminURL the PostgreSQL server of a "postgres" store) that runs up to n
// workflows at once, mints its token of scopes and registers svc. stop
// stops them all.
func Start(ctx context.Context, bin, data, store, adminURL string, n int, latency time.Duration, scopes string) (w *World, stop func() error, err error) {
	w = &World{Model: NewModel(latency), Things: NewThings()}
	svc := httptest.NewServer(w.Things)
	modelSrv := httptest.NewUnstartedServer(w.Model)
	modelSrv.Config.MaxHeaderBytes = 1 << 16
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
