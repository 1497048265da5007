package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	llmagent "github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
	"golang.org/x/sync/errgroup"
)

// The live mode (-llm live) replays n recorded workflows of an LLM agent
// against a version with other instructions, every completion requested
// from a scripted model on loopback that answers after -model-delay. The
// server's model registry and provider clients are wired at integration;
// until then this mode runs the replay service, the batch runner and a
// SQLite store in this process, with a replay.Models that speaks JSON over
// HTTP to the scripted model. It prints the batch's wall time against the
// ideal (rounds of concurrency replays, one completion each, times the
// delay) and this process's peak resident memory.

// liveAgent is one plan step whose answer is the outcome; %q is the
// instructions.
const liveAgent = `{"purpose": %q, "tools": ["svc"],
 "steps": [{"action": "decide", "plan": {"prompt": "goal"}, "save_as": "decision"}],
 "outcome": "decision"}`

const (
	lenientInstructions = "You review refunds. Approve them."
	strictInstructions  = "You review refunds. Escalate them."
)

// decide is the scripted model's answer to a system message.
func decide(system string) string {
	if strings.Contains(system, "Escalate") {
		return "escalated"
	}
	return "approved"
}

// instant answers at once, to record the original workflows.
type instant struct{}

func (instant) Complete(_ context.Context, req llmagent.ChatRequest) (llmagent.ChatResponse, error) {
	return llmagent.ChatResponse{Message: llmagent.ChatMessage{Role: llmagent.RoleAssistant, Content: decide(req.Messages[0].Content)},
		Usage: &llmagent.Usage{InputTokens: 40, OutputTokens: 1}}, nil
}

// loopbackModel is a replay.Models that asks the scripted model over HTTP.
type loopbackModel struct {
	url    string
	client *http.Client
}

func (m loopbackModel) Complete(ctx context.Context, _, _ string, _, _ int, req llmagent.ChatRequest) (llmagent.ChatResponse, *replay.Cost, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return llmagent.ChatResponse{}, nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return llmagent.ChatResponse{}, nil, err
	}
	resp, err := m.client.Do(hreq)
	if err != nil {
		return llmagent.ChatResponse{}, nil, err
	}
	defer resp.Body.Close()
	var out llmagent.ChatResponse
	if resp.StatusCode != http.StatusOK {
		return out, nil, &llmagent.LLMError{Status: resp.StatusCode, Message: resp.Status}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, nil, err
	}
	return out, &replay.Cost{Amount: 0.15 * float64(out.Usage.InputTokens+out.Usage.OutputTokens) / 1e6, Currency: "USD"}, nil
}

// scriptedModel serves the loopback model: after delay, the decision its
// system message calls for. It counts requests per request body.
func scriptedModel(delay time.Duration, requests *sync.Map, total *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req llmagent.ChatRequest
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil || len(req.Messages) == 0 {
			http.Error(w, "not a chat request", http.StatusBadRequest)
			return
		}
		total.Add(1)
		n, _ := requests.LoadOrStore(string(body), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(llmagent.ChatResponse{Message: llmagent.ChatMessage{Role: llmagent.RoleAssistant,
			Content: decide(req.Messages[0].Content)}, Usage: &llmagent.Usage{InputTokens: 40, OutputTokens: 1}, FinishReason: "stop"})
	})
}

func runLive(ctx context.Context, o options, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "bench-batch-live-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "agentplane.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := liveSetup(ctx, db); err != nil {
		return err
	}
	runner := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db,
		Models: model.LookupFunc(func(_ context.Context, tenant, name string) (*model.Model, error) {
			return &model.Model{ID: "mdl_instant", Tenant: tenant, Name: name, Provider: model.OpenAI, Model: "instant", Revision: 1}, nil
		}),
		LLM: llm.SameClient(llm.ClientFunc(instant{}.Complete))})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go runner.Run(runCtx)
	defer runner.Close(context.Background())

	fmt.Fprintf(stderr, "live: recording %d workflows …\n", o.n)
	ids, err := liveSeed(ctx, runner, o.n, o.seedConc)
	if err != nil {
		return err
	}

	var (
		requests sync.Map
		total    atomic.Int64
	)
	model := httptest.NewServer(scriptedModel(o.modelDelay, &requests, &total))
	defer model.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency}}
	svc := &replay.Service{Workflows: db, Versions: db, Programs: runner, Store: db,
		Models: loopbackModel{url: model.URL, client: client}}
	batches := &replay.BatchRunner{Service: svc, Store: db, Owner: "bench", Lease: time.Minute}
	b := replay.NewBatch("acme", "refunds@2", len(ids), replay.Creator{Sub: "bench"}, time.Now().UTC())
	b.Mode, b.Concurrency = replay.Mode{LLM: replay.LLMLive, UnrecordedCalls: replay.UnrecordedSkip}, o.concurrency

	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // peak RSS from here
	start := time.Now()
	if err := db.CreateBatch(ctx, b, ids, "bench", batches.LeaseUntil(start), nil); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "live: replaying %d workflows at concurrency %d, the model answering after %s …\n", len(ids), o.concurrency, o.modelDelay)
	go batches.Run(runCtx)
	var got *replay.Batch
	for deadline := start.Add(o.limit); ; time.Sleep(20 * time.Millisecond) {
		if got, err = db.Batch(ctx, "acme", b.ID); err != nil {
			return err
		}
		if got.Status != replay.BatchRunning {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("live batch still running after %s: %d of %d done", o.limit, got.Done, got.Total)
		}
	}
	wall := time.Since(start)
	if got.FinishedAt != nil {
		wall = got.FinishedAt.Sub(got.CreatedAt)
	}
	peak := selfStatus("VmHWM:")
	if got.Status != replay.BatchCompleted || got.Done != o.n || got.Changed != o.n {
		return fmt.Errorf("live batch ended %s with %d of %d replayed, %d changed (want all): %s", got.Status, got.Done, o.n, got.Changed, got.Error)
	}
	var twice int
	requests.Range(func(_, n any) bool {
		if n.(*atomic.Int64).Load() > 1 {
			twice++
		}
		return true
	})
	if twice > 0 || total.Load() != int64(o.n) {
		return fmt.Errorf("the model got %d requests for %d completions, %d of them more than once", total.Load(), o.n, twice)
	}
	rounds := (o.n + o.concurrency - 1) / o.concurrency
	ideal := time.Duration(rounds) * o.modelDelay
	fmt.Fprintf(stdout, "live batch: %d workflows, 1 completion each, concurrency %d, model delay %s\n", o.n, o.concurrency, o.modelDelay)
	fmt.Fprintf(stdout, "wall %.2f s, ideal %.2f s (%d rounds), overhead %.1f%%; peak RSS %.0f MB; replay usage %d tokens, cost %s\n",
		wall.Seconds(), ideal.Seconds(), rounds, 100*(wall.Seconds()/ideal.Seconds()-1), float64(peak)/(1<<20),
		got.Usage.Replay.InputTokens+got.Usage.Replay.OutputTokens, costText(got.Usage.Replay.Cost))
	return nil
}

func costText(c *replay.Cost) string {
	if c == nil {
		return "none"
	}
	return strconv.FormatFloat(c.Amount, 'f', 6, 64) + " " + c.Currency
}

// liveSetup registers the svc tool (plan steps offer its operation) and
// deploys refunds@1 (lenient) and refunds@2 (strict).
func liveSetup(ctx context.Context, db *sqlite.DB) error {
	now := time.Now()
	svc := &tool.Tool{ID: "tool_01JBENCH00000000000000000S", Tenant: "acme", Name: "svc", Type: tool.OpenAPI,
		Auth: tool.Auth{Type: tool.AuthNone}, PolicyClass: "standard", SideEffects: []string{}, Revision: 1, OperationCount: 1,
		IndexedAt: now, CreatedAt: now, UpdatedAt: now, BaseURL: "http://svc.invalid"}
	ops := []tool.Operation{{ID: "getThing", Kind: tool.Read, Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`),
		HTTP: &tool.HTTPBinding{Method: "GET", Path: "/things/{id}", Params: []tool.Param{{Name: "id", In: "path", Required: true}}}}}
	if err := db.CreateTool(ctx, svc, ops, nil); err != nil {
		return err
	}
	for i, instructions := range []string{lenientInstructions, strictInstructions} {
		v := &llmagent.Version{Tenant: "acme", Name: "refunds", Version: strconv.Itoa(i + 1), Tools: []string{"svc"},
			Definition: json.RawMessage(fmt.Sprintf(liveAgent, instructions)), DeployedAt: now}
		if err := db.DeployVersion(ctx, v, i == 0, nil); err != nil {
			return err
		}
	}
	return nil
}

// liveSeed records n workflows of refunds@1, conc at a time.
func liveSeed(ctx context.Context, runner *workflow.Runner, n, conc int) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var g errgroup.Group
	for range conc {
		g.Go(func() error {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				wf, err := runner.Start(ctx, workflow.StartRequest{Tenant: "acme", Agent: "refunds", Version: "1",
					Goal: "Refund " + strconv.Itoa(i), Caller: workflow.Caller{Sub: "bench", Tenant: "acme"}})
				if err != nil {
					return err
				}
				done, _, err := runner.Finished(ctx, "acme", wf.ID)
				if err != nil {
					return err
				}
				if done.Outcome != "approved" {
					return fmt.Errorf("workflow %s ended %s: %s", wf.ID, done.Outcome, done.Error)
				}
				ids[i] = wf.ID
			}
			return nil
		})
	}
	return ids, g.Wait()
}

// selfStatus reads a size field of /proc/self/status in bytes, 0 where
// there is none.
func selfStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
