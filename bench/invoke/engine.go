package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/tool"
)

// engineResult is the engine's own cost per step and one tool round trip.
type engineResult struct {
	runs, steps  int
	perStep      time.Duration
	cpuPerStep   time.Duration
	roundTrips   int
	roundTripP50 time.Duration
	roundTripP99 time.Duration
}

// instantEnv answers every tool call at once, as the tool service would.
type instantEnv struct {
	agent.NoPlanner
	agent.NoDecisions
}

var instantAnswer = json.RawMessage(`{"id":"a","ok":true}`)

func (instantEnv) Call(context.Context, int, agent.ToolCall) (agent.CallResult, error) {
	return agent.CallResult{Status: agent.StatusOK, Result: instantAnswer}, nil
}

// compileBenchAgent compiles the benchmarked definition against a catalog
// holding the tool service's one operation.
func compileBenchAgent() (*agent.Program, error) {
	def, errs := agent.DecodeDefinition([]byte(agentDefinition))
	if len(errs) > 0 {
		return nil, fmt.Errorf("decode definition: %v", errs)
	}
	cat := agent.NewCatalog()
	cat.Add(&tool.Tool{Name: "svc", Type: tool.OpenAPI, PolicyClass: "standard"},
		[]tool.Operation{{ID: "getThing", Kind: tool.Read, Summary: "Read a thing"}})
	prog, errs := agent.Compile(def, cat)
	if len(errs) > 0 {
		return nil, fmt.Errorf("compile definition: %v", errs)
	}
	return prog, nil
}

// measureEngine runs the definition in process runs times with an instant
// Env, then times roundTrips plain GETs to the tool service.
func measureEngine(ctx context.Context, svc *toolService, runs, roundTrips int) (engineResult, error) {
	prog, err := compileBenchAgent()
	if err != nil {
		return engineResult{}, err
	}
	in := agent.Input{
		Goal: "bench", Context: map[string]any{}, Agent: agentName, Version: "1",
		Caller: agent.Caller{Sub: "bench", Tenant: "bench", Scopes: []string{"tool:*"}},
	}
	res := engineResult{runs: runs}
	execute := func() (int, error) {
		events, r, err := prog.Execute(ctx, in, instantEnv{})
		if err != nil {
			return 0, err
		}
		if r.Outcome != agentOutcome || len(events) != agentSteps {
			return 0, fmt.Errorf("engine run: outcome %q, %d events", r.Outcome, len(events))
		}
		return len(events), nil
	}
	for range min(runs, 200) { // warm up
		if _, err := execute(); err != nil {
			return res, err
		}
	}
	cpu0 := processCPU()
	start := time.Now()
	for range runs {
		n, err := execute()
		if err != nil {
			return res, err
		}
		res.steps += n
	}
	wall := time.Since(start)
	res.perStep = wall / time.Duration(res.steps)
	res.cpuPerStep = (processCPU() - cpu0) / time.Duration(res.steps)
	res.steps /= runs

	lat, err := roundTripLatencies(ctx, svc.URL+"/things/a", roundTrips)
	if err != nil {
		return res, err
	}
	res.roundTrips = len(lat)
	res.roundTripP50 = lat[len(lat)/2]
	res.roundTripP99 = lat[min(len(lat)*99/100, len(lat)-1)]
	return res, nil
}

// roundTripLatencies times n keep-alive GETs of url, sorted.
func roundTripLatencies(ctx context.Context, url string, n int) ([]time.Duration, error) {
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	get := func() error {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
		}
		return nil
	}
	for range min(n, 200) {
		if err := get(); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := get(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat, nil
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
