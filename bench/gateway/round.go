package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

// roundFigures are one round's figures: n runs of one agent at once.
type roundFigures struct {
	wall time.Duration
	cpu  time.Duration // the server's, over the round
	// faults are the server's minor page faults over the round.
	faults int64
	// benchCPU is this process's: the agent, the model, the tool and the
	// invoking clients.
	benchCPU time.Duration
	peakRSS  int64
	peakG    int
	// runOverhead is each run's time from invoke to answer less the
	// model's, halved (per completion), as bench/llm reports it.
	runOverhead []time.Duration
	// The gateway's overhead per exchange, at the agent: completions and
	// calls together, and each alone; session is each run's MCP session
	// requests (initialize, initialized, tools/list, close) in all.
	exchange, completion, call, session []time.Duration
	// requests counts the gateway requests of each kind.
	requests map[string]int
}

// result is one agent's figures over its rounds.
type result struct {
	agent, store string
	n            int
	ideal        time.Duration
	rounds       []roundFigures
}

func (r *result) add(f roundFigures) { r.rounds = append(r.rounds, f) }

// round invokes n runs of agent name at once and measures them; profile,
// when set, receives the server's CPU profile meanwhile.
func (b *bench) round(ctx context.Context, name string, n int, profile string) (f roundFigures, err error) {
	b.model.Reset()
	b.things.Reset()
	b.agent.reset()
	if err := b.srv.ResetPeakRSS(); err != nil {
		return f, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.limit)
	defer cancel()
	stopSampling := benchserver.PeakGoroutines(ctx, b.srv, b.o.latency/2)
	profiled := make(chan error, 1)
	if profile != "" {
		go func() { profiled <- benchserver.CPUProfile(ctx, b.debugAddr, b.o.profileFor, profile) }()
	} else {
		profiled <- nil
	}
	sent := make([]time.Time, n)
	done := make([]time.Time, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	cpuBefore, benchBefore, faultsBefore := b.srv.CPU(), benchserver.ProcessCPU("self"), b.srv.MinorFaults()
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			sent[i] = time.Now()
			err := invoke(ctx, b.srv, name, "w"+strconv.Itoa(i))
			done[i] = time.Now()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	f.wall = time.Since(start)
	if fails := b.agent.failures(); len(fails) > 0 && firstErr == nil {
		firstErr = fmt.Errorf("the gateway answered the agent other than 200: %v", fails)
	}
	f.cpu = b.srv.CPU() - cpuBefore
	f.faults = b.srv.MinorFaults() - faultsBefore
	f.benchCPU = benchserver.ProcessCPU("self") - benchBefore
	f.peakG = stopSampling()
	f.peakRSS = b.srv.PeakRSS()
	if firstErr != nil {
		return f, firstErr
	}
	if err := <-profiled; err != nil {
		return f, err
	}
	if c, t := b.model.Requests(), b.things.Calls(); c != int64(2*n) || t != int64(n) {
		return f, fmt.Errorf("the model answered %d completions and the tool %d calls; want %d and %d (the gateway's other answers: %v)",
			c, t, 2*n, n, b.agent.failures())
	}
	var byRun map[string][][]exchange
	if name == external {
		byRun = b.agent.exchanges()
	}
	for i := range n {
		id := "w" + strconv.Itoa(i)
		t := b.model.Times(id)
		if len(t) != 4 {
			return f, fmt.Errorf("run %s made %d completions, want 2", id, len(t)/2)
		}
		modelTime := []time.Duration{t[1].Sub(t[0]), t[3].Sub(t[2])}
		f.runOverhead = append(f.runOverhead, (done[i].Sub(sent[i])-modelTime[0]-modelTime[1])/2)
		if name != external {
			continue
		}
		if err := f.addExchanges(id, byRun[id], modelTime, b.things.Took(id)); err != nil {
			return f, err
		}
	}
	return f, b.srv.Exited()
}

// addExchanges adds one external run's gateway overheads: each exchange's
// time at the agent less the model's or the tool's.
func (f *roundFigures) addExchanges(id string, attempts [][]exchange, modelTime []time.Duration, toolTime time.Duration) error {
	if len(attempts) != 1 {
		return fmt.Errorf("run %s made %d attempts, want 1", id, len(attempts))
	}
	var completions int
	var session time.Duration
	if f.requests == nil {
		f.requests = map[string]int{}
	}
	for _, ex := range attempts[0] {
		f.requests[ex.kind]++
		switch ex.kind {
		case kindCompletion:
			if completions == len(modelTime) {
				return fmt.Errorf("run %s sent more than %d completions", id, len(modelTime))
			}
			d := ex.took() - modelTime[completions]
			completions++
			f.completion = append(f.completion, d)
			f.exchange = append(f.exchange, d)
		case kindCall:
			d := ex.took() - toolTime
			f.call = append(f.call, d)
			f.exchange = append(f.exchange, d)
		default:
			session += ex.took()
		}
	}
	f.session = append(f.session, session)
	return nil
}

// pooled is every round's durations of one kind, together.
func (r *result) pooled(of func(*roundFigures) []time.Duration) benchserver.Latencies {
	var all benchserver.Latencies
	for i := range r.rounds {
		all = append(all, of(&r.rounds[i])...)
	}
	return all
}

// cpuPerRun is the server's and this process's CPU per run over all
// rounds.
func (r *result) cpuPerRun() (server, bench time.Duration) {
	for _, f := range r.rounds {
		server += f.cpu
		bench += f.benchCPU
	}
	runs := time.Duration(len(r.rounds) * r.n)
	return server / runs, bench / runs
}

// faultsPerRun is the server's minor page faults per run over all rounds.
func (r *result) faultsPerRun() float64 {
	var faults int64
	for _, f := range r.rounds {
		faults += f.faults
	}
	return float64(faults) / float64(len(r.rounds)*r.n)
}

func (r *result) medianWall() time.Duration {
	var walls []time.Duration
	for _, f := range r.rounds {
		walls = append(walls, f.wall)
	}
	slices.Sort(walls)
	return walls[len(walls)/2]
}

func (r *result) peaks() (rss int64, goroutines int) {
	for _, f := range r.rounds {
		rss, goroutines = max(rss, f.peakRSS), max(goroutines, f.peakG)
	}
	return rss, goroutines
}

func printTable(w io.Writer, o options, rs []result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "Runs in flight at once; the scripted model answers after %s; 2 completions + 1 tool call a run; %d rounds a row", o.latency, o.rounds)
	if o.compare {
		fmt.Fprint(w, ", the two agents' alternated on one server")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "agent\tstore\truns\tgateway overhead/exchange p50\tp99\tcompletion p50\tcall p50\tMCP session/run p50\trun overhead/completion p50\tp99\twall (median)\tideal\twall/ideal\tpeak RSS MB\tpeak goroutines\tserver CPU/run\tbench CPU/run\tpage faults/run\t")
	for i := range rs {
		r := &rs[i]
		gw := []string{"–", "–", "–", "–", "–"}
		if r.agent == external {
			ex := r.pooled(func(f *roundFigures) []time.Duration { return f.exchange })
			gw = []string{ms(ex.P(50)), ms(ex.P(99)),
				ms(r.pooled(func(f *roundFigures) []time.Duration { return f.completion }).P(50)),
				ms(r.pooled(func(f *roundFigures) []time.Duration { return f.call }).P(50)),
				ms(r.pooled(func(f *roundFigures) []time.Duration { return f.session }).P(50))}
		}
		run := r.pooled(func(f *roundFigures) []time.Duration { return f.runOverhead })
		rss, g := r.peaks()
		wall := r.medianWall()
		server, bench := r.cpuPerRun()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.0f\t%d\t%s\t%s\t%.0f\t\n", r.agent, r.store, r.n,
			gw[0], gw[1], gw[2], gw[3], gw[4], ms(run.P(50)), ms(run.P(99)),
			wall.Round(10*time.Millisecond), r.ideal, float64(wall)/float64(r.ideal), float64(rss)/(1<<20), g, ms(server), ms(bench), r.faultsPerRun())
	}
	tw.Flush()
	for i := range rs {
		if i+1 < len(rs) && rs[i].agent == external && rs[i+1].agent == defined {
			printRatio(w, &rs[i], &rs[i+1])
		}
	}
}

// printRatio says the server's CPU per run of the external agent over the
// defined agent's, in all and round by round.
func printRatio(w io.Writer, ext, def *result) {
	var extCPU, defCPU time.Duration
	for _, f := range ext.rounds {
		extCPU += f.cpu
	}
	for _, f := range def.rounds {
		defCPU += f.cpu
	}
	fmt.Fprintf(w, "server CPU per run, external ÷ defined, %s, %d runs: %s (by round:", ext.store, ext.n,
		ratio(extCPU/time.Duration(len(ext.rounds)), defCPU/time.Duration(len(def.rounds))))
	for i := range min(len(ext.rounds), len(def.rounds)) {
		fmt.Fprint(w, " "+ratio(ext.rounds[i].cpu, def.rounds[i].cpu))
	}
	fmt.Fprintln(w, ")")
}

// ratio is a÷b, or a dash where b is too small to divide by (/proc counts
// CPU in 10 ms ticks).
func ratio(a, b time.Duration) string {
	if b < 10*time.Millisecond {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
