package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// receiver is a webhook endpoint that verifies each request with the
// official Standard Webhooks library and records what it accepted.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	secrets []string
	seen    map[string]bool // webhook-ids accepted (the dedup a receiver does)
	order   map[string][]string
	hits    int
	// answer, when set, answers a request instead (after verification).
	answer func(w http.ResponseWriter, r *http.Request, hit int) bool
}

func newReceiver(t *testing.T, secrets ...string) *receiver {
	rc := &receiver{t: t, secrets: secrets, seen: map[string]bool{}, order: map[string][]string{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.hits++
	hit, secrets, answer := rc.hits, rc.secrets, rc.answer
	rc.mu.Unlock()
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			rc.t.Errorf("secret %q: %v", s, err)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			rc.t.Errorf("signature under %.12s…: %v (header %q)", s, err, r.Header.Get("webhook-signature"))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
	}
	if answer != nil && answer(w, r, hit) {
		return
	}
	var p struct {
		Type string `json:"type"`
		Data struct {
			WorkflowID string `json:"workflow_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		rc.t.Errorf("payload %s: %v", body, err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if id := r.Header.Get("webhook-id"); !rc.seen[id] {
		rc.seen[id] = true
		rc.order[p.Data.WorkflowID] = append(rc.order[p.Data.WorkflowID], p.Type)
	}
	w.WriteHeader(http.StatusNoContent)
}

type world struct {
	db   *sqlite.DB
	hook *webhook.Webhook
}

func newWorld(t *testing.T, url string, events ...string) *world {
	db := sqlite.NewTestDB(t)
	if len(events) == 0 {
		events = webhook.EventTypes
	}
	wh := &webhook.Webhook{ID: ids.New(ids.Webhook), Tenant: "acme", URL: url, Events: events,
		Secret: webhook.NewSecret(), CreatedAt: time.Now()}
	if err := db.CreateWebhook(t.Context(), wh, nil); err != nil {
		t.Fatal(err)
	}
	return &world{db: db, hook: wh}
}

// run stores a workflow that waits at an approval, is approved and
// completes: three events, in that order.
func (w *world) run(t *testing.T) string {
	t.Helper()
	ctx, now := t.Context(), time.Now().UTC().Truncate(time.Microsecond)
	wf := &workflow.Workflow{ID: ids.New(ids.Workflow), Tenant: "acme", Agent: "refunds", AgentVersion: "1", Status: workflow.Running,
		Goal: "g", Context: json.RawMessage(`{}`), Caller: workflow.Caller{Sub: "alice", Tenant: "acme"}, MaxToolCalls: 5,
		StartedAt: now, Deadline: now.Add(time.Hour), Owner: "o", LeaseUntil: now.Add(time.Hour)}
	must(t, w.db.CreateWorkflow(ctx, wf, nil))
	a := &workflow.Approval{WorkflowID: wf.ID, Tenant: "acme", Agent: "refunds", AgentVersion: "1", Step: 1, Action: "ok",
		Reason: "big", OnTimeout: "deny", Invoker: "alice", RequestedAt: now, Deadline: now.Add(time.Hour), Remaining: time.Hour}
	must(t, w.db.SuspendWorkflow(ctx, "o", a))
	_, _, err := w.db.DecideApproval(ctx, workflow.Decision{Tenant: "acme", WorkflowID: wf.ID, Step: 1,
		Status: workflow.ApprovalApproved, By: "bob", At: now}, "o", now.Add(time.Hour), nil)
	must(t, err)
	wf.Status, wf.Outcome, wf.FinishedAt = workflow.Completed, "refunded", now
	must(t, w.db.FinishWorkflow(ctx, "o", wf, nil))
	return wf.ID
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (w *world) deliverer(owner string) *webhook.Deliverer {
	return &webhook.Deliverer{Store: w.db, Webhooks: w.db, HTTP: http.DefaultClient, Owner: owner,
		Timeout: 500 * time.Millisecond, Lease: time.Second, Backoff: func(int) time.Duration { return 10 * time.Millisecond }}
}

// drain runs d until nothing is pending or the deadline passes.
func (w *world) drain(t *testing.T, d *webhook.Deliverer) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := d.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		pending, err := w.db.Deliveries(t.Context(), "acme", w.hook.ID, webhook.Pending, 1000)
		must(t, err)
		if len(pending) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("deliveries still pending after 15 s")
}

func TestDeliveriesInOrderPerWorkflowAtLeastOnceAcrossAStoppedDeliverer(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	w := newWorld(t, rc.srv.URL)
	rc.secrets = []string{w.hook.Secret}
	var wfs []string
	for range 4 {
		wfs = append(wfs, w.run(t))
	}
	// The first request hangs until its deliverer is stopped; every third
	// answers 500 once.
	hung := make(chan struct{})
	rc.answer = func(rw http.ResponseWriter, r *http.Request, hit int) bool {
		switch {
		case hit == 1:
			close(hung)
			<-r.Context().Done()
			return true
		case hit%3 == 0:
			http.Error(rw, "try later", http.StatusInternalServerError)
			return true
		}
		return false
	}
	ctx, stop := context.WithCancel(t.Context())
	a := w.deliverer("replica-a")
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.RunOnce(ctx)
	}()
	<-hung
	stop() // replica a stops mid-delivery: its lease lapses unrecorded
	<-done
	// Replica b's clock runs past a's lease: what a held is b's to send.
	b := w.deliverer("replica-b")
	b.Now = func() time.Time { return time.Now().Add(2 * a.Lease) }
	w.drain(t, b)

	want := []string{webhook.WorkflowWaiting, webhook.ApprovalDecided, webhook.WorkflowCompleted}
	for _, id := range wfs {
		if got := rc.order[id]; !slices.Equal(got, want) {
			t.Errorf("workflow %s: events received %v, want %v", id, got, want)
		}
	}
	all, err := w.db.Deliveries(t.Context(), "acme", w.hook.ID, "", 1000)
	must(t, err)
	if len(all) != 12 || len(rc.seen) != 12 {
		t.Fatalf("%d deliveries, %d distinct webhook-ids received; want 12 and 12", len(all), len(rc.seen))
	}
	retried := 0
	for _, d := range all {
		if d.Status != webhook.Delivered || !rc.seen[d.ID] {
			t.Errorf("delivery %s: %s, received %v", d.ID, d.Status, rc.seen[d.ID])
		}
		if d.Attempts > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Error("no delivery needed a second attempt")
	}
}

func TestRotatedSecretsBothSign(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	w := newWorld(t, rc.srv.URL, webhook.WorkflowCompleted)
	old := w.hook.Secret
	next := webhook.NewSecret()
	must(t, w.db.RotateSecret(t.Context(), "acme", w.hook.ID, next, time.Now().Add(webhook.RetryFor), nil))
	rc.secrets = []string{old, next} // each verifies alone: the header holds both signatures
	w.run(t)
	w.drain(t, w.deliverer("r"))
	if len(rc.seen) != 1 {
		t.Fatalf("received %d deliveries, want 1", len(rc.seen))
	}
}

func TestHostileReceiversAreBoundedRetriedAndRecorded(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a redirect was followed")
	}))
	t.Cleanup(target.Close)
	big := strings.Repeat("x", 10<<20)
	for _, tc := range []struct {
		name   string
		answer http.HandlerFunc
		status int
		says   string
	}{
		{"hangs", func(w http.ResponseWriter, r *http.Request) {
			// An attempt not bounded by its time-out would see this
			// answer and count as delivered. With the body read, the
			// server sees the deliverer go.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		}, 0, "no answer within"},
		{"500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, 500, "answered 500"},
		{"redirects", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target.URL, http.StatusFound) }, 302, "redirects are not followed"},
		{"10 MB", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503); io.WriteString(w, big) }, 503, "answered 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.answer)
			t.Cleanup(srv.Close)
			w := newWorld(t, srv.URL, webhook.WorkflowCompleted)
			w.run(t)
			d := w.deliverer("r")
			d.Backoff = func(int) time.Duration { return 0 } // the second pass finds it due
			for range 2 {
				if _, err := d.RunOnce(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			ds, err := w.db.Deliveries(t.Context(), "acme", w.hook.ID, "", 10)
			must(t, err)
			if len(ds) != 1 {
				t.Fatalf("%d deliveries", len(ds))
			}
			got := ds[0]
			if got.Status != webhook.Pending || got.Attempts != 2 || got.LastStatus != tc.status || !strings.Contains(got.LastError, tc.says) || got.NextAttempt.IsZero() {
				t.Errorf("delivery = %+v; want pending after 2 attempts, status %d, error saying %q", got, tc.status, tc.says)
			}
		})
	}
}

func TestADeliveryFailsAfterADayOfRetries(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusBadGateway) }))
	t.Cleanup(srv.Close)
	w := newWorld(t, srv.URL, webhook.WorkflowCompleted)
	w.run(t)
	d := w.deliverer("r")
	d.Now = func() time.Time { return time.Now().Add(webhook.RetryFor + time.Minute) }
	if _, err := d.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	failed, err := w.db.Deliveries(t.Context(), "acme", w.hook.ID, webhook.Failed, 10)
	must(t, err)
	if len(failed) != 1 || failed[0].LastStatus != 502 {
		t.Fatalf("failed deliveries = %+v", failed)
	}
	// A retry makes it pending again, due at once, with the same webhook-id.
	r, err := w.db.RetryDelivery(t.Context(), "acme", w.hook.ID, failed[0].ID, time.Now(), nil)
	must(t, err)
	if r.ID != failed[0].ID || r.Status != webhook.Pending {
		t.Fatalf("retried = %+v", r)
	}
}

// TestWakeDeliversBeforeTheTick: a deliverer ticking once an hour sends a
// delivery as soon as it is woken.
func TestWakeDeliversBeforeTheTick(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	w := newWorld(t, rc.srv.URL, webhook.WorkflowCompleted)
	rc.secrets = []string{w.hook.Secret}
	passes := make(chan int, 8)
	d := w.deliverer("replica-a")
	d.Store = passCounter{Store: w.db, passes: passes}
	d.Tick = time.Hour
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { stop(); <-done }()
	pass := func(what string) int {
		t.Helper()
		select {
		case n := <-passes:
			return n
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s pass within 30 s", what)
			return 0
		}
	}
	if n := pass("first"); n != 0 { // its first pass finds nothing
		t.Fatalf("the first pass claimed %d deliveries, want none", n)
	}
	id := w.run(t)
	d.Wake()
	if n := pass("woken"); n != 1 {
		t.Fatalf("the woken pass claimed %d deliveries, want 1", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc.mu.Lock()
		got := len(rc.order[id])
		rc.mu.Unlock()
		if got == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the woken deliverer sent nothing within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// passCounter sends on passes how many deliveries each pass claimed.
type passCounter struct {
	webhook.Store
	passes chan<- int
}

func (p passCounter) ClaimDeliveries(ctx context.Context, owner string, now, until time.Time, limit int) ([]*webhook.Delivery, error) {
	ds, err := p.Store.ClaimDeliveries(ctx, owner, now, until, limit)
	select {
	case p.passes <- len(ds):
	default: // nobody counts passes any more
	}
	return ds, err
}

// TestFormatMakesTheSignedBody: a deliverer's Format makes the body each
// webhook receives from the queued event (read back whole), the signature
// covers that body, and a Format that fails is an attempt that failed.
func TestFormatMakesTheSignedBody(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		bodies []string
	)
	var secret string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = v.Verify(body, r.Header)
		}
		if err != nil {
			t.Errorf("the formatted body does not verify: %v", err)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-test+json" {
			t.Errorf("Content-Type %q, want the formatter's", ct)
		}
		mu.Lock()
		bodies = append(bodies, string(body))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	w := newWorld(t, srv.URL, webhook.WorkflowWaiting, webhook.WorkflowCompleted)
	secret = w.hook.Secret
	id := w.run(t)
	d := w.deliverer("r")
	d.Format = func(wh *webhook.Webhook, body []byte) ([]byte, string, error) {
		ev, err := webhook.ReadWorkflowEvent(body)
		if err != nil {
			return nil, "", err
		}
		return fmt.Appendf(nil, `{"hook":%q,"type":%q,"task":%q,"status":%q,"outcome":%q,"reason":%q}`,
			wh.ID, ev.Type, ev.Workflow.ID, ev.Workflow.Status, ev.Workflow.Outcome, ev.Reason), "application/x-test+json", nil
	}
	w.drain(t, d)
	want := []string{
		fmt.Sprintf(`{"hook":%q,"type":"workflow.waiting","task":%q,"status":"waiting","outcome":"","reason":"big"}`, w.hook.ID, id),
		fmt.Sprintf(`{"hook":%q,"type":"workflow.completed","task":%q,"status":"completed","outcome":"refunded","reason":""}`, w.hook.ID, id),
	}
	if !slices.Equal(bodies, want) {
		t.Errorf("bodies:\n%s\nwant\n%s", strings.Join(bodies, "\n"), strings.Join(want, "\n"))
	}

	w.run(t)
	d.Format = func(*webhook.Webhook, []byte) ([]byte, string, error) { return nil, "", errors.New("no body") }
	if _, err := d.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	pending, err := w.db.Deliveries(t.Context(), "acme", w.hook.ID, webhook.Pending, 10)
	must(t, err)
	// The workflow's first event was tried once and waits for its retry;
	// its second waits behind it.
	if len(pending) != 2 || pending[1].Attempts != 1 || pending[1].LastError != "format: no body" || pending[0].Attempts != 0 || len(bodies) != 2 {
		t.Errorf("after a Format error: %d pending, %d bodies sent", len(pending), len(bodies))
		for _, p := range pending {
			t.Logf("%+v", *p)
		}
	}
}

func TestReadWorkflowEventRefusesOtherEvents(t *testing.T) {
	t.Parallel()
	ev := webhook.BatchDone("acme", "rb_1", "refunds@2", "completed", "", time.Now())
	if _, err := webhook.ReadWorkflowEvent(ev.Body); err == nil || !strings.Contains(err.Error(), "replay_batch.completed") {
		t.Errorf("a batch event read as a workflow's: %v", err)
	}
	if _, err := webhook.ReadWorkflowEvent([]byte(`{`)); err == nil {
		t.Error("a broken body read")
	}
}

// TestARefusedReceiverKeepsItsAddress: a delivery to a host name that
// resolves to a loopback address is refused when dialled, and its
// last_error says so without the address.
func TestARefusedReceiverKeepsItsAddress(t *testing.T) {
	rc := newReceiver(t)
	port := rc.srv.URL[strings.LastIndexByte(rc.srv.URL, ':')+1:]
	w := newWorld(t, "http://localhost:"+port+"/hooks", webhook.WorkflowCompleted)
	w.run(t)
	d := w.deliverer("r")
	d.HTTP = outbound.New(outbound.Options{}).HTTPClient()
	if _, err := d.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	ds, err := w.db.Deliveries(t.Context(), "acme", w.hook.ID, "", 10)
	must(t, err)
	if len(ds) != 1 || ds[0].Attempts != 1 {
		t.Fatalf("deliveries %+v, want one attempted", ds)
	}
	got := ds[0].LastError
	if !strings.Contains(got, "localhost resolves to a private address") || !strings.Contains(got, "--allow-private-host") {
		t.Errorf("last_error %q: want the name refused and the flag named", got)
	}
	for _, leak := range []string{"127.0.0.1", "::1", "dial tcp"} {
		if strings.Contains(got, leak) {
			t.Errorf("last_error %q reveals %q", got, leak)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.hits != 0 {
		t.Errorf("the receiver was reached %d times", rc.hits)
	}
}
