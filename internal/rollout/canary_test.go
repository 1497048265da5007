package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// replica is one server on the shared database: its store connection,
// runner, invoker and rollout service, wired as cmd/agentplane wires them.
type replica struct {
	db       *postgres.DB
	runner   *workflow.Runner
	invoker  *workflow.Invoker
	rollouts *rollout.Service
}

// counted receives the id of each workflow a replica's rollout service
// has counted (after Finished returns).
func newReplica(t *testing.T, url, owner string, counted chan<- string) *replica {
	t.Helper()
	db, err := postgres.Open(t.Context(), url, postgres.WithWriters(2), postgres.WithMaxConns(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc := &rollout.Service{Store: db, Versions: db, Workflows: db}
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Owner: owner, Lease: time.Minute, Arms: svc})
	r.OnFinish(func(ctx context.Context, wf *workflow.Workflow) {
		svc.Finished(ctx, wf)
		if counted != nil {
			counted <- wf.ID
		}
	})
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return &replica{db: db, runner: r, invoker: &workflow.Invoker{Runner: r, Workflows: db, Now: time.Now}, rollouts: svc}
}

// deploy stores a version of the agent triage whose one step finishes it
// with outcome.
func deploy(t *testing.T, db *postgres.DB, outcome string, promote bool) {
	t.Helper()
	def := json.RawMessage(fmt.Sprintf(`{"steps": [{"action": "done", "finish": %q}]}`, outcome))
	if err := db.DeployVersion(t.Context(), &agent.Version{Tenant: "acme", Name: "triage", Definition: def, DeployedAt: time.Now()}, promote, nil); err != nil {
		t.Fatal(err)
	}
}

var caller = workflow.Caller{Sub: "alice", Tenant: "acme", Scopes: []string{"agents:invoke"}}

func invoke(t *testing.T, r *replica, customer string) *workflow.Workflow {
	t.Helper()
	got, err := r.invoker.Invoke(t.Context(), workflow.Invocation{StartRequest: workflow.StartRequest{
		Tenant: "acme", Agent: "triage", Goal: "triage the ticket", Caller: caller,
		Context: map[string]any{"customer_id": customer}}})
	if err != nil {
		t.Fatalf("invoke for %s: %v", customer, err)
	}
	return got.Workflow
}

func percent(p float64) *float64 { return &p }

// triageVersions is a new database with triage's version 1 (the default,
// ending cleared) and 2 (ending escalated).
func triageVersions(t *testing.T) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(t.Context(), postgres.NewTestDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	deploy(t, db, "cleared", false)
	deploy(t, db, "escalated", false)
	return db
}

// TestCanaryAcrossReplicas: on PostgreSQL with two replicas, 1,000
// invocations of the default at a 10 % canary run the target about 100
// times, each workflow saying its arm; a sticky key's invocations run one
// arm whichever replica takes them.
func TestCanaryAcrossReplicas(t *testing.T) {
	url := postgres.NewTestDatabase(t)
	a, b := newReplica(t, url, "replica-a", nil), newReplica(t, url, "replica-b", nil)
	deploy(t, a.db, "cleared", false)
	deploy(t, a.db, "cleared", false)
	v, created, err := a.rollouts.Put(t.Context(), "acme", "triage", rollout.Request{Target: "2", Percent: percent(10),
		Sticky: "context.customer_id"}, audit.Actor{Sub: "alice"}, nil)
	if err != nil || !created {
		t.Fatalf("put rollout: created %v, %v", created, err)
	}
	if v.State != rollout.Active || v.Target != "2" || v.BaseVersion != "1" || v.MinRuns != rollout.DefaultMinRuns {
		t.Fatalf("rollout = %+v", v.Rollout)
	}

	const n = 1000
	arms := make([]string, n)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				r := a
				if i%2 == 1 {
					r = b
				}
				wf := invoke(t, r, fmt.Sprintf("cus_%04d", i))
				arms[i] = armOf(t, wf)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	canary := 0
	for _, arm := range arms {
		if arm == workflow.ArmCanary {
			canary++
		}
	}
	t.Logf("%d of %d invocations ran the target", canary, n)
	if canary < 60 || canary > 140 {
		t.Errorf("%d of %d invocations ran the target, want 60 to 140 at 10 %%", canary, n)
	}
	// The first 200 customers again, each on the other replica.
	for i := range 200 {
		r := b
		if i%2 == 1 {
			r = a
		}
		if arm := armOf(t, invoke(t, r, fmt.Sprintf("cus_%04d", i))); arm != arms[i] {
			t.Errorf("customer %d ran %s, then %s on the other replica", i, arms[i], arm)
		}
	}
}

// armOf is the arm a workflow ran, checked against its version.
func armOf(t *testing.T, wf *workflow.Workflow) string {
	t.Helper()
	if wf.Rollout == nil {
		t.Errorf("workflow %s names no rollout arm", wf.ID)
		return ""
	}
	want := map[string]string{workflow.ArmCanary: "2", workflow.ArmDefault: "1"}[wf.Rollout.Arm]
	if wf.AgentVersion != want {
		t.Errorf("workflow %s ran %s on arm %s", wf.ID, wf.AgentVersion, wf.Rollout.Arm)
	}
	return wf.Rollout.Arm
}

// TestCanaryRollsBack: a check the target fails rolls the rollout back
// once the target's arm has min_runs, and the next invocation runs the
// default; a replica's restart (a new service on the database) sees it.
func TestCanaryRollsBack(t *testing.T) {
	url := postgres.NewTestDatabase(t)
	counted := make(chan string, 100)
	a, b := newReplica(t, url, "replica-a", counted), newReplica(t, url, "replica-b", counted)
	deploy(t, a.db, "cleared", false)
	deploy(t, a.db, "escalated", false)
	hook := &webhook.Webhook{ID: ids.New(ids.Webhook), Tenant: "acme", URL: "https://hooks.example.com/", Secret: "whsec_test",
		Events: []string{webhook.RolloutStarted, webhook.RolloutRolledBack}, CreatedAt: time.Now()}
	if err := a.db.CreateWebhook(t.Context(), hook, nil); err != nil {
		t.Fatal(err)
	}
	const minRuns = 5
	if _, _, err := a.rollouts.Put(t.Context(), "acme", "triage", rollout.Request{Target: "2", Percent: percent(100),
		Checks: []replay.CheckSpec{{Name: "cleared", Expr: "run.outcome == 'cleared'"}}, Gate: map[string]float64{"cleared": 0.8},
		MinRuns: &[]int{minRuns}[0]}, audit.Actor{Sub: "alice"}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range minRuns {
		r := []*replica{a, b}[i%2]
		wf := invoke(t, r, fmt.Sprintf("cus_%d", i))
		if wf.AgentVersion != "2" {
			t.Fatalf("invocation %d at 100 %% ran version %s", i, wf.AgentVersion)
		}
		if i < minRuns-1 {
			waitCounted(t, counted, wf.ID)
			if got, err := b.rollouts.Get(t.Context(), "acme", "triage"); err != nil || got.State != rollout.Active {
				t.Fatalf("after %d runs: %v, %v; want it active until min_runs", i+1, got, err)
			}
			continue
		}
		waitCounted(t, counted, wf.ID)
	}
	restarted := newReplica(t, url, "replica-c", nil)
	got, err := restarted.rollouts.Get(t.Context(), "acme", "triage")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != rollout.RolledBack || got.FailedCheck != "cleared" || got.Percent != 0 {
		t.Fatalf("after %d failing runs: state %s, failed check %q, percent %v", minRuns, got.State, got.FailedCheck, got.Percent)
	}
	target := got.Arms[1]
	if target.Arm != workflow.ArmCanary || target.Runs != minRuns || len(target.Checks) != 1 || target.Checks[0].Failed != minRuns {
		t.Errorf("target arm = %+v", target)
	}
	wf := invoke(t, restarted, "cus_next")
	if wf.AgentVersion != "1" || wf.Rollout != nil {
		t.Errorf("the next invocation ran version %s (arm %+v), want the default 1 and no arm", wf.AgentVersion, wf.Rollout)
	}
	recs, err := a.db.QueryAudit(t.Context(), "acme", audit.Filter{Action: "rollout.rollback", Limit: 10})
	if err != nil || len(recs) != 1 {
		t.Errorf("rollback audit records: %v, %v; want one", recs, err)
	}
	dl, err := a.db.Deliveries(t.Context(), "acme", hook.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, d := range dl {
		types = append(types, d.Type)
		if d.Type == webhook.RolloutRolledBack && !strings.Contains(string(d.Body), `"failed_check":"cleared"`) {
			t.Errorf("rolled-back event without its failing check: %s", d.Body)
		}
	}
	slices.Sort(types)
	if want := []string{webhook.RolloutRolledBack, webhook.RolloutStarted}; !slices.Equal(types, want) {
		t.Errorf("webhook events %v, want %v", types, want)
	}
	if _, _, err := a.rollouts.Put(t.Context(), "acme", "triage", rollout.Request{Target: "1", Percent: percent(5)}, audit.Actor{}, nil); !problem.Is(err, problem.ValidationFailed) {
		t.Errorf("a rollout of the default itself: %v, want a validation problem", err)
	}
}

// TestCanaryPromotes: with auto_promote, a target whose every gate holds
// after min_runs becomes the default and the rollout is promoted.
func TestCanaryPromotes(t *testing.T) {
	url := postgres.NewTestDatabase(t)
	counted := make(chan string, 100)
	a := newReplica(t, url, "replica-a", counted)
	deploy(t, a.db, "cleared", false)
	deploy(t, a.db, "cleared", false)
	if _, _, err := a.rollouts.Put(t.Context(), "acme", "triage", rollout.Request{Target: "triage@2", Percent: percent(100),
		Checks:  []replay.CheckSpec{{Name: "cleared", Expr: "run.outcome == 'cleared' && run.steps.size() == 1"}},
		MinRuns: &[]int{3}[0], AutoPromote: true}, audit.Actor{Sub: "alice"}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		wf := invoke(t, a, fmt.Sprint("cus_", i))
		waitCounted(t, counted, wf.ID)
	}
	v, err := a.rollouts.Get(t.Context(), "acme", "triage")
	if err != nil || v.State != rollout.Promoted {
		t.Fatalf("after 3 passing runs: %+v, %v; want promoted", v, err)
	}
	ag, err := a.db.Agent(t.Context(), "acme", "triage")
	if err != nil || ag.DefaultVersion != "2" {
		t.Errorf("the default after the promotion: %+v, %v; want 2", ag, err)
	}
	if wf := invoke(t, a, "cus_next"); wf.AgentVersion != "2" || wf.Rollout != nil {
		t.Errorf("after the promotion the invocation ran %s on %+v", wf.AgentVersion, wf.Rollout)
	}
}

func waitCounted(t *testing.T, counted <-chan string, id string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-counted:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("workflow %s was not counted", id)
		}
	}
}

// TestSweepCountsWhatAStoppedReplicaLeft: workflows whose replica stopped
// between their end and their count (here, a runner that counts nothing)
// are counted by another replica's sweep, once, and its gate decides.
func TestSweepCountsWhatAStoppedReplicaLeft(t *testing.T) {
	db := triageVersions(t)
	svc := &rollout.Service{Store: db, Versions: db, Workflows: db}
	stopped := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Owner: "replica-a", Lease: time.Minute, Arms: svc})
	t.Cleanup(func() { _ = stopped.Close(context.Background()) })
	if _, _, err := svc.Put(t.Context(), "acme", "triage", rollout.Request{Target: "2", Percent: percent(100),
		Checks: []replay.CheckSpec{{Name: "cleared", Expr: "run.outcome == 'cleared'"}}, MinRuns: &[]int{3}[0]}, audit.Actor{}, nil); err != nil {
		t.Fatal(err)
	}
	inv := &workflow.Invoker{Runner: stopped, Workflows: db, Now: time.Now}
	for i := range 3 {
		got, err := inv.Invoke(t.Context(), workflow.Invocation{StartRequest: workflow.StartRequest{Tenant: "acme", Agent: "triage",
			Goal: "triage", Caller: caller, Context: map[string]any{"customer_id": fmt.Sprint(i)}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := stopped.Finished(t.Context(), "acme", got.Workflow.ID); err != nil {
			t.Fatal(err)
		}
	}
	later := func() time.Time { return time.Now().Add(2 * time.Minute) }
	sweeper := &rollout.Service{Store: db, Versions: db, Workflows: db, Now: later}
	if v, err := sweeper.Get(t.Context(), "acme", "triage"); err != nil || v.State != rollout.Active || v.Arms[1].Runs != 0 {
		t.Fatalf("before the sweep: %+v, %v", v, err)
	}
	for range 2 { // a second sweep finds nothing more to count
		if err := sweeper.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	v, err := sweeper.Get(t.Context(), "acme", "triage")
	if err != nil || v.State != rollout.RolledBack || v.Arms[1].Runs != 3 || v.FailedCheck != "cleared" {
		t.Errorf("after the sweep: %+v, %v; want rolled back after 3 canary runs", v, err)
	}
}

// summingStore counts the sums of a rollout's runs asked of it.
type summingStore struct {
	rollout.Store
	sums atomic.Int64
}

func (s *summingStore) RolloutTotals(ctx context.Context, tenant, id string) ([]rollout.ArmTotals, []rollout.CheckCount, error) {
	s.sums.Add(1)
	return s.Store.RolloutTotals(ctx, tenant, id)
}

// TestNothingToJudgeSumsNothing: a rollout with no checks and no
// auto_promote has nothing its runs' sums could decide, so a finished
// workflow does not sum every run the rollout has counted (a scan that
// grows with the rollout, once per workflow).
func TestNothingToJudgeSumsNothing(t *testing.T) {
	db := triageVersions(t)
	store := &summingStore{Store: db}
	svc := &rollout.Service{Store: store, Versions: db, Workflows: db}
	r := workflow.New(workflow.Options{Store: db, Versions: db, Tools: db, Owner: "replica-a", Lease: time.Minute, Arms: svc})
	counted := make(chan string, 4)
	r.OnFinish(func(ctx context.Context, wf *workflow.Workflow) {
		svc.Finished(ctx, wf)
		counted <- wf.ID
	})
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if _, _, err := svc.Put(t.Context(), "acme", "triage", rollout.Request{Target: "2", Percent: percent(50), MinRuns: &[]int{1}[0]}, audit.Actor{}, nil); err != nil {
		t.Fatal(err)
	}
	before := store.sums.Load()
	inv := &workflow.Invoker{Runner: r, Workflows: db, Now: time.Now}
	for i := range 4 {
		if _, err := inv.Invoke(t.Context(), workflow.Invocation{StartRequest: workflow.StartRequest{Tenant: "acme", Agent: "triage",
			Goal: "triage", Caller: caller, Context: map[string]any{"customer_id": fmt.Sprint(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		<-counted
	}
	if n := store.sums.Load() - before; n != 0 {
		t.Errorf("4 finished workflows summed the rollout's runs %d times, want none", n)
	}
	v, err := svc.Get(t.Context(), "acme", "triage")
	if err != nil || v.State != rollout.Active || v.Arms[0].Runs+v.Arms[1].Runs != 4 {
		t.Errorf("after 4 runs: %+v, %v; want active with 4 counted", v, err)
	}
}
