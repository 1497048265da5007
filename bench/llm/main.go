// Command llm benchmarks LLM workflows held in flight at once: through the
// real server binary (built from ./cmd/agentplane and started as its own
// process, SQLite by default) it invokes n workflows of an agent with one
// plan step at the same moment; a scripted model on loopback, speaking Chat
// Completions, answers each completion after -latency: the first asks for
// one tool call (a GET to a loopback service), the second answers. So each
// workflow makes two completions and one tool call, and all n wait on the
// model together.
//
//	go run ./bench/llm [-n 5000] [-latency 1s] [-store sqlite|postgres|both]
//
// It reports the orchestration overhead per completion — a workflow's time
// from invoke to answer less the time the model took, over its two
// completions — at p50 and p99, the gap between a completion's answer and
// the workflow's next completion request (recording the answer, the tool
// call, building the next request), the server's peak RSS and goroutines,
// and the wall time of all n against the ideal (latency × completions).
// The server runs with --max-running n, so no workflow queues.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
)

const tokenScopes = "tools:write agents:write agents:invoke workflows:read tool:*"

type options struct {
	stores      []string
	sizes       []int
	latency     time.Duration
	databaseURL string
	repo        string
	binary      string
	limit       time.Duration
	// cpuProfile, when set, receives the server's CPU profile of the
	// in-flight phase.
	cpuProfile string
}

func main() { benchserver.Main("bench/llm", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/llm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	sizes := fs.String("n", "5000", "comma-separated numbers of workflows in flight at once (each at most 20,000)")
	latency := fs.Duration("latency", time.Second, "how long the scripted model takes to answer")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	limit := fs.Duration("limit", 5*time.Minute, "time limit of one size")
	cpuProfile := fs.String("cpuprofile", "", "write the server's CPU profile while the workflows are in flight to this file (go tool pprof reads it)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{latency: *latency, repo: *repo, binary: *binary, limit: *limit, cpuProfile: *cpuProfile}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 20000 {
			return options{}, fmt.Errorf("-n: %q is not a number of workflows from 1 to 20000", f)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.latency <= 0 || o.limit <= 0 {
		return options{}, errors.New("-latency and -limit must be positive")
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

// result is one size's figures.
type result struct {
	store             string
	n                 int
	overhead50        time.Duration // per completion
	overhead99        time.Duration
	gap50, gap99      time.Duration
	wall, ideal       time.Duration
	peakRSS           int64
	cpuPerWorkflow    time.Duration
	peakGoroutines    int
	completions, tool int64
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "llm", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var rs []result
	for _, store := range o.stores {
		for _, n := range o.sizes {
			r, err := measure(ctx, o, bin, fmt.Sprintf("%s/%s-%d", tmp, store, n), store, n, stderr)
			if err != nil {
				printTable(stdout, o, rs)
				return fmt.Errorf("%s, %d workflows: %w", store, n, err)
			}
			rs = append(rs, r)
		}
	}
	printTable(stdout, o, rs)
	return nil
}

// model is the scripted model: it answers each completion after latency,
// and notes when each workflow's requests arrived and were answered.
type model struct {
	latency time.Duration
	mu      sync.Mutex
	// times[id] are arrival and answer times of id's completions, in order.
	times    map[string][]time.Time
	requests atomic.Int64
}

var idPattern = regexp.MustCompile(`w[0-9]+`)

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	m.requests.Add(1)
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	id, answered := "", false
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			id = idPattern.FindString(msg.Content)
		case "tool":
			answered = true
		}
	}
	select {
	case <-time.After(m.latency):
	case <-r.Context().Done():
		return
	}
	msg := `{"role":"assistant","content":"done: ` + id + `"}`
	finish := "stop"
	if !answered {
		msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"svc__getThing","arguments":"{\"id\":\"` + id + `\"}"}}]}`
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-bench","object":"chat.completion","model":"scripted","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":120,"completion_tokens":20,"total_tokens":140}}`, msg, finish)
	m.mu.Lock()
	m.times[id] = append(m.times[id], arrived, time.Now())
	m.mu.Unlock()
}

const thingSpec = `{"openapi": "3.0.3", "info": {"title": "things", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/things/{id}": {"get": {"operationId": "getThing", "summary": "Read a thing",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok"}}}}}}`

const llmAgent = `{"tools": ["svc"],
 "inputs": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
 "instructions": "'Read the thing, then say done.'",
 "steps": [{"action": "solve", "plan": {"prompt": "'thing ' + context.id", "save_as": "answer"}}],
 "output": "answer", "outcome": "'answered'"}`

func measure(ctx context.Context, o options, bin, data, store string, n int, stderr io.Writer) (res result, err error) {
	res = result{store: store, n: n, ideal: 2 * o.latency}
	var tools atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tools.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"ok":true}`, strings.TrimPrefix(r.URL.Path, "/things/"))
	}))
	defer svc.Close()
	m := &model{latency: o.latency, times: make(map[string][]time.Time, n)}
	modelSrv := httptest.NewUnstartedServer(m)
	modelSrv.Config.MaxHeaderBytes = 1 << 16
	modelSrv.Start()
	defer modelSrv.Close()
	debugAddr, err := benchserver.FreeAddr()
	if err != nil {
		return res, err
	}
	sc := benchserver.Config{Binary: bin, Data: data, Args: []string{
		"--debug-addr", debugAddr, "--allow-private-networks",
		"--max-running", strconv.Itoa(n), "--rate-limit", "1000000", "--rate-limit-burst", "1000000",
		"--llm-base-url", modelSrv.URL + "/v1", "--llm-model", "scripted", "--workflow-timeout", "10m",
	}}
	srv, stop, err := benchserver.StartOn(ctx, sc, store, o.databaseURL)
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := srv.MintToken(ctx, tokenScopes); err != nil {
		return res, err
	}
	reg := map[string]any{"name": "svc", "type": "openapi", "spec": fmt.Sprintf(thingSpec, svc.URL)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/tools", reg); err != nil || st != http.StatusCreated {
		return res, fmt.Errorf("register tool: %d %s %v", st, body, err)
	}
	dep := map[string]any{"name": "bench", "version": "1", "definition": json.RawMessage(llmAgent)}
	if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
		return res, fmt.Errorf("deploy bench@1: %d %s %v", st, body, err)
	}
	// One workflow first, so the figures hold no first-use costs.
	if err := invoke(ctx, srv, "w99999999"); err != nil {
		return res, err
	}
	m.mu.Lock()
	clear(m.times)
	m.mu.Unlock()
	m.requests.Store(0)
	tools.Store(0)
	if err := srv.ResetPeakRSS(); err != nil {
		return res, err
	}

	ctx, cancel := context.WithTimeout(ctx, o.limit)
	defer cancel()
	peakG := make(chan int, 1)
	sampling, stopSampling := context.WithCancel(ctx)
	go func() {
		peak := 0
		for sampling.Err() == nil {
			if g, err := benchserver.Goroutines(sampling, debugAddr); err == nil {
				peak = max(peak, g)
			}
			select {
			case <-sampling.Done():
			case <-time.After(o.latency / 5):
			}
		}
		peakG <- peak
	}()
	profiled := make(chan error, 1)
	if o.cpuProfile != "" {
		go func() { profiled <- cpuProfile(ctx, debugAddr, 2*o.latency, o.cpuProfile) }()
	} else {
		profiled <- nil
	}
	fmt.Fprintf(stderr, "%s: %d LLM workflows at once, the model answering after %s …\n", store, n, o.latency)
	sent := make([]time.Time, n)
	done := make([]time.Time, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	cpuBefore := srv.CPU()
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			sent[i] = time.Now()
			err := invoke(ctx, srv, "w"+strconv.Itoa(i))
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
	res.wall = time.Since(start)
	res.cpuPerWorkflow = (srv.CPU() - cpuBefore) / time.Duration(n)
	stopSampling()
	res.peakGoroutines = <-peakG
	res.peakRSS = srv.PeakRSS()
	if firstErr != nil {
		return res, firstErr
	}
	if err := <-profiled; err != nil {
		return res, err
	}
	res.completions, res.tool = m.requests.Load(), tools.Load()
	if res.completions != int64(2*n) || res.tool != int64(n) {
		return res, fmt.Errorf("the model answered %d completions and the tool %d calls; want %d and %d", res.completions, res.tool, 2*n, n)
	}
	var overheads, gaps, heads, tails []time.Duration
	m.mu.Lock()
	for i := range n {
		t := m.times["w"+strconv.Itoa(i)]
		if len(t) != 4 {
			m.mu.Unlock()
			return res, fmt.Errorf("workflow w%d made %d completions, want 2", i, len(t)/2)
		}
		modelTime := t[1].Sub(t[0]) + t[3].Sub(t[2])
		overheads = append(overheads, (done[i].Sub(sent[i])-modelTime)/2)
		gaps = append(gaps, t[2].Sub(t[1]))
		heads = append(heads, t[0].Sub(sent[i]))
		tails = append(tails, done[i].Sub(t[3]))
	}
	m.mu.Unlock()
	res.overhead50, res.overhead99 = percentile(overheads, 0.50), percentile(overheads, 0.99)
	res.gap50, res.gap99 = percentile(gaps, 0.50), percentile(gaps, 0.99)
	fmt.Fprintf(stderr, "%s: invoke→first request p50 %s p99 %s; last answer→response p50 %s p99 %s\n", store,
		ms(percentile(heads, 0.5)), ms(percentile(heads, 0.99)), ms(percentile(tails, 0.5)), ms(percentile(tails, 0.99)))
	return res, srv.Exited()
}

// invoke runs the agent on thing id synchronously and checks its answer.
func invoke(ctx context.Context, srv *benchserver.Server, id string) error {
	st, body, err := srv.Do(ctx, "POST", "/v1/agents/bench/invoke", map[string]any{"goal": "bench", "context": map[string]any{"id": id}})
	if err != nil {
		return err
	}
	var wf struct {
		Outcome string `json:"outcome"`
		Output  string `json:"output"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &wf) != nil || wf.Outcome != "answered" || wf.Output != "done: "+id {
		return fmt.Errorf("invoke %s: %d %.400s; want 200, answered, with output %q", id, st, body, "done: "+id)
	}
	return nil
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// cpuProfile writes the server's CPU profile of the next d to file.
func cpuProfile(ctx context.Context, addr string, d time.Duration, file string) error {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printTable(w io.Writer, o options, rs []result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "LLM workflows in flight at once; the scripted model answers after %s; 2 completions + 1 tool call each\n", o.latency)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tworkflows\toverhead/completion p50\tp99\tanswer→next request p50\tp99\twall\tideal\twall/ideal\tpeak RSS MB\tpeak goroutines\tserver CPU/workflow\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.0f\t%d\t%s\t\n", r.store, r.n,
			ms(r.overhead50), ms(r.overhead99), ms(r.gap50), ms(r.gap99),
			r.wall.Round(10*time.Millisecond), r.ideal, float64(r.wall)/float64(r.ideal), float64(r.peakRSS)/(1<<20), r.peakGoroutines,
			ms(r.cpuPerWorkflow))
	}
	tw.Flush()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
