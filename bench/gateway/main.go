// Command gateway benchmarks external agents through the run gateway:
// through the real server binary (built from ./cmd/agentplane and started
// as its own process, SQLite by default) it invokes n runs of an external
// agent version at the same moment. The agent is the Go recipe
// (examples/external/go-agent/goagent: openai-go and the MCP Go SDK),
// served by this process, so its CPU is not the server's; it sends its two
// completions to a scripted model on loopback (Chat Completions, answering
// after -latency: first with one tool call, then with the answer) and its
// tool call (a GET to a loopback service) through the gateway.
//
//	go run ./bench/gateway [-n 100,1000] [-latency 1s] [-rounds 3] [-store sqlite|postgres|both]
//
// It reports the gateway's overhead per exchange — the time from the agent
// sending a completion or a call to its reading the answer, less the time
// the model or the tool took as they report it — at p50 and p99, the MCP
// session's own requests per run, and the server's CPU per run, peak RSS
// and goroutines, and the wall time of all n against the ideal (latency ×
// completions). With -compare (the default) the same server runs the same
// work as bench/llm's defined agent (one plan step) in rounds alternated
// with the external agent's, so the CPU ratio between them is of one
// sitting. The server runs with --max-running n, so no run queues.
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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/bench/internal/scripted"
)

const tokenScopes = "tools:write agents:write agents:invoke workflows:read tool:*"

// The two agents of the same work.
const (
	external = "external"
	defined  = "defined"
)

type options struct {
	stores  []string
	sizes   []int
	latency time.Duration
	rounds  int
	compare bool
	// warm runs an unmeasured round of each agent at each size first.
	warm        bool
	databaseURL string
	repo        string
	binary      string
	limit       time.Duration
	// cpuProfile, when set, receives the server's CPU profile of the
	// external agent's round profileRound, and cpuProfile+".defined" that
	// of the defined agent's.
	cpuProfile string
	// profileFor is how long each profile lasts.
	profileFor time.Duration
	// profileRound is the round (from 1) whose profiles are written.
	profileRound int
}

func main() { benchserver.Main("bench/gateway", run) }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench/gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stores := benchserver.AddStoreFlags(fs)
	sizes := fs.String("n", "100,1000", "comma-separated numbers of runs in flight at once (each at most 5,000)")
	latency := fs.Duration("latency", time.Second, "how long the scripted model takes to answer")
	rounds := fs.Int("rounds", 3, "rounds of each agent, alternated (1 to 20)")
	compare := fs.Bool("compare", true, "run the defined agent of the same work in rounds alternated with the external agent's")
	repo := fs.String("repo", ".", "module root holding ./cmd/agentplane")
	binary := fs.String("binary", "", "use this agentplane binary instead of building one")
	limit := fs.Duration("limit", 5*time.Minute, "time limit of one round")
	cpuProfile := fs.String("cpuprofile", "", "write the server's CPU profile of an external round (-profile-round) to this file, and of the same defined round to this file + .defined (go tool pprof reads them)")
	profileFor := fs.Duration("profile-for", 0, "how long each CPU profile lasts (default 2.5 × -latency, the first completions to the last)")
	profileRound := fs.Int("profile-round", 1, "the round of each agent whose CPU profile -cpuprofile writes (the first holds the connections' and the first sessions' costs)")
	warm := fs.Bool("warm", true, "run an unmeasured round of each agent at each size first, so that every measured round finds the server's memory and connections as a server past its first burst has them (without it, the first agent's first round pays for the memory both agents then reuse)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{latency: *latency, rounds: *rounds, compare: *compare, warm: *warm, repo: *repo, binary: *binary, limit: *limit, cpuProfile: *cpuProfile, profileFor: *profileFor, profileRound: *profileRound}
	var err error
	if o.stores, err = stores.Stores(); err != nil {
		return options{}, err
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 5000 {
			return options{}, fmt.Errorf("-n: %q is not a number of runs from 1 to 5000", f)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.latency <= 0 || o.limit <= 0 {
		return options{}, errors.New("-latency and -limit must be positive")
	}
	if o.profileFor <= 0 {
		o.profileFor = o.latency * 5 / 2
	}
	if o.rounds < 1 || o.rounds > 20 {
		return options{}, fmt.Errorf("-rounds: %d is not from 1 to 20", o.rounds)
	}
	if o.profileRound < 1 || o.profileRound > o.rounds {
		return options{}, fmt.Errorf("-profile-round: %d is not a round from 1 to -rounds (%d)", o.profileRound, o.rounds)
	}
	o.databaseURL = stores.DatabaseURL(getenv)
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	bin, tmp, cleanup, err := benchserver.Workdir(ctx, "gateway", o.binary, o.repo, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	ag := newAgent()
	restore := useTiming(ag, max(100, slices.Max(o.sizes)))
	defer restore()
	var rs []result
	for _, store := range o.stores {
		for _, n := range o.sizes {
			r, err := measure(ctx, o, ag, bin, fmt.Sprintf("%s/%s-%d", tmp, store, n), store, n, stderr)
			rs = append(rs, r...)
			if err != nil {
				printTable(stdout, o, rs)
				return fmt.Errorf("%s, %d runs: %w", store, n, err)
			}
		}
	}
	printTable(stdout, o, rs)
	return nil
}

// useTiming makes the bench process's default transport one that times the
// agent's gateway requests and keeps up to conns idle connections a host
// (the default's 2 would have the agent dial the gateway anew for most of
// its requests); restore puts the default back.
func useTiming(ag *agent, conns int) (restore func()) {
	orig := http.DefaultTransport
	base := orig.(*http.Transport).Clone()
	base.MaxIdleConns, base.MaxIdleConnsPerHost = 2*conns, conns
	http.DefaultTransport = &timing{base: base, agent: ag}
	return func() {
		base.CloseIdleConnections()
		http.DefaultTransport = orig
	}
}

// bench is one server with both agents deployed, and the loopback
// services they use.
type bench struct {
	o         options
	srv       *benchserver.Server
	debugAddr string
	model     *scripted.Model
	things    *scripted.Things
	agent     *agent
}

func measure(ctx context.Context, o options, ag *agent, bin, data, store string, n int, stderr io.Writer) (rs []result, err error) {
	// In this process each run in flight holds its invoke's socket, the
	// agent's ends of the server's request and of its own gateway
	// requests, the model's and the tool's; the server, which inherits the
	// limit, as many.
	if _, err := benchserver.RaiseFileLimit(uint64(5*n + 1024)); err != nil {
		return nil, fmt.Errorf("%d runs at once: %w", n, err)
	}
	agentSrv := httptest.NewServer(ag)
	defer agentSrv.Close()
	world, stop, err := scripted.Start(ctx, bin, data, store, o.databaseURL, n, o.latency, false, tokenScopes)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	srv := world.Server
	deps := []map[string]any{
		{"name": defined, "version": "1", "definition": json.RawMessage(scripted.PlanAgent)},
		{"name": external, "version": "1", "external": map[string]any{"url": agentSrv.URL, "tools": []string{"svc"}, "models": []string{"default"}}},
	}
	for _, dep := range deps {
		if st, body, err := srv.Do(ctx, "POST", "/v1/agents", dep); err != nil || st != http.StatusCreated {
			return nil, fmt.Errorf("deploy %s: %d %s %v", dep["name"], st, body, err)
		}
	}
	b := &bench{o: o, srv: srv, debugAddr: world.DebugAddr, model: world.Model, things: world.Things, agent: ag}
	agents := []string{external}
	if o.compare {
		agents = append(agents, defined)
	}
	// One run of each first, so the figures hold no first-use costs.
	for _, name := range agents {
		if err := invoke(ctx, srv, name, "w99999999"); err != nil {
			return nil, err
		}
	}
	if o.warm {
		for _, name := range agents {
			fmt.Fprintf(stderr, "%s: an unmeasured round of %d %s runs, to warm the server …\n", store, n, name)
			if _, err := b.round(ctx, name, n, ""); err != nil {
				return nil, fmt.Errorf("%s warm-up round: %w\nthe server's log ends:\n%s", name, err, srv.LogTail())
			}
		}
	}
	byAgent := map[string]*result{}
	for _, name := range agents {
		byAgent[name] = &result{agent: name, store: store, n: n, ideal: 2 * o.latency}
	}
	defer func() {
		for _, name := range agents {
			if r := byAgent[name]; len(r.rounds) > 0 {
				rs = append(rs, *r)
			}
		}
	}()
	for i := range o.rounds {
		order := agents
		if i%2 == 1 && len(agents) == 2 {
			order = []string{agents[1], agents[0]}
		}
		for _, name := range order {
			profile := ""
			if o.cpuProfile != "" && len(byAgent[name].rounds) == o.profileRound-1 {
				profile = o.cpuProfile
				if name == defined {
					profile += ".defined"
				}
			}
			fmt.Fprintf(stderr, "%s: round %d, %d %s runs at once, the model answering after %s …\n", store, i+1, n, name, o.latency)
			rd, err := b.round(ctx, name, n, profile)
			if err != nil {
				return rs, fmt.Errorf("%s round %d: %w\nthe server's log ends:\n%s", name, i+1, err, srv.LogTail())
			}
			byAgent[name].add(rd)
			if name == external {
				fmt.Fprintf(stderr, "%s: gateway requests of %d runs: %d completions, %d calls, %d of the MCP sessions' own\n",
					store, n, rd.requests[kindCompletion], rd.requests[kindCall], rd.requests[kindSession])
			}
		}
	}
	return rs, srv.Exited()
}

// invoke runs agent name on thing id synchronously and checks its answer:
// the defined agent's output is the answer, the external agent's an object
// holding it.
func invoke(ctx context.Context, srv *benchserver.Server, name, id string) error {
	st, body, err := srv.Do(ctx, "POST", "/v1/agents/"+name+"/invoke", map[string]any{"goal": "thing " + id, "context": map[string]any{"id": id}})
	if err != nil {
		return err
	}
	var wf struct {
		Outcome string          `json:"outcome"`
		Output  json.RawMessage `json:"output"`
	}
	want := "done: " + id
	ok := st == http.StatusOK && json.Unmarshal(body, &wf) == nil && wf.Outcome == "answered"
	if ok {
		var out struct {
			Answer string `json:"answer"`
		}
		var s string
		switch name {
		case defined:
			ok = json.Unmarshal(wf.Output, &s) == nil && s == want
		default:
			ok = json.Unmarshal(wf.Output, &out) == nil && out.Answer == want
		}
	}
	if !ok {
		return fmt.Errorf("invoke %s on %s: %d %.400s; want 200, answered, with the answer %q", name, id, st, body, want)
	}
	return nil
}
