package siem_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/siem"
	"github.com/agentplane/agentplane/internal/store/postgres"
	"github.com/agentplane/agentplane/internal/store/sqlite"
)

// receiver is a syslog receiver on loopback: it reads octet-counted
// frames (RFC 6587) from every connection and keeps their messages.
type receiver struct {
	ln    net.Listener
	mu    sync.Mutex
	msgs  []string
	conns []net.Conn
}

func listen(t *testing.T, addr string, cfg *tls.Config) *receiver {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port of a receiver just closed may linger
		if cfg != nil {
			ln, err = tls.Listen("tcp", addr, cfg)
		} else {
			ln, err = net.Listen("tcp", addr)
		}
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			r.mu.Unlock()
			go r.read(c)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *receiver) read(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		n, err := br.ReadString(' ')
		if err != nil {
			return
		}
		size, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			return
		}
		msg := make([]byte, size)
		if _, err := io.ReadFull(br, msg); err != nil {
			return
		}
		r.mu.Lock()
		r.msgs = append(r.msgs, string(msg))
		r.mu.Unlock()
	}
}

func (r *receiver) stop() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

var rfc5424 = regexp.MustCompile(`^<(\d+)>1 (\S+) (\S+) agentplane (\d+) ocsf-(\d+) - (\{.*\})$`)

// events are the received messages' events, checked as RFC 5424.
func (r *receiver) events(t *testing.T) []siem.Event {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []siem.Event
	for _, m := range r.msgs {
		g := rfc5424.FindStringSubmatch(m)
		if g == nil {
			t.Fatalf("not an RFC 5424 message of agentplane: %q", m)
		}
		if pri, _ := strconv.Atoi(g[1]); pri/8 != 13 {
			t.Errorf("facility %d, want 13 (log audit)", pri/8)
		}
		if _, err := time.Parse(time.RFC3339, g[2]); err != nil {
			t.Errorf("timestamp %q: %v", g[2], err)
		}
		var e siem.Event
		if err := json.Unmarshal([]byte(g[6]), &e); err != nil {
			t.Fatalf("message body: %v", err)
		}
		if g[5] != strconv.Itoa(e.ClassUID) {
			t.Errorf("MSGID ocsf-%s, event class %d", g[5], e.ClassUID)
		}
		out = append(out, e)
	}
	return out
}

// seqsByTenant are the received seqs of each tenant, in arrival order.
func seqsByTenant(events []siem.Event) map[string][]int64 {
	out := map[string][]int64{}
	for _, e := range events {
		out[e.Metadata.TenantUID] = append(out[e.Metadata.TenantUID], e.Metadata.Sequence)
	}
	return out
}

// inOrder checks that seqs hold 1..n, each first arrival after the one
// before (a batch sent again after a failure repeats a run, at least once).
func inOrder(t *testing.T, tenant string, seqs []int64, n int64) {
	t.Helper()
	next := int64(1)
	for _, s := range seqs {
		switch {
		case s == next:
			next++
		case s < next: // a repeat
		default:
			t.Fatalf("%s: seq %d arrived before %d: %v", tenant, s, next, seqs)
		}
	}
	if next != n+1 {
		t.Fatalf("%s: received up to %d of %d: %v", tenant, next-1, n, seqs)
	}
}

// gauge is the value of a metric with one series.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}

// store is a real store of either engine.
type store interface {
	siem.Store
	AppendAudit(ctx context.Context, recs ...*audit.Record) error
}

// engines open a new store of each engine (PostgreSQL when
// AGENTPLANE_TEST_DATABASE_URL is set).
var engines = []struct {
	name string
	open func(t *testing.T) store
}{
	{"sqlite", func(t *testing.T) store { return sqlite.NewTestDB(t) }},
	{"postgres", func(t *testing.T) store {
		db, err := postgres.Open(t.Context(), postgres.NewTestDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}},
}

func appendN(t *testing.T, db store, tenant string, n int) {
	t.Helper()
	for i := range n {
		rec := &audit.Record{Tenant: tenant, Actor: audit.Actor{Sub: "alice"}, Action: "tool.read", Outcome: audit.Success,
			Status: 200, RequestID: fmt.Sprintf("req_%d", i), Details: audit.Details(map[string]any{"method": "GET"})}
		if err := db.AppendAudit(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
}

// loopback is an outbound client that allows 127.0.0.1 by name, as
// --allow-private-host does.
func loopback(t *testing.T) *outbound.Client {
	t.Helper()
	h, err := outbound.ParseAllowedHost("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return outbound.New(outbound.Options{AllowHosts: []outbound.AllowedHost{h}})
}

func options(c *outbound.Client) siem.SinkOptions {
	return siem.SinkOptions{Dial: c.DialContext, CheckHost: c.CheckHost, Timeout: 2 * time.Second, Hostname: "test-host"}
}

// drain runs passes until the sink is caught up or fails.
func drain(t *testing.T, p *siem.Pusher, s siem.Sink) error {
	t.Helper()
	for range 100 {
		more, err := p.Pass(t.Context(), s)
		if err != nil || !more {
			return err
		}
	}
	t.Fatal("the sink never caught up")
	return nil
}

func TestSyslogSinkDeliversEveryChainInOrderAcrossAReceiverRestart(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { syslogAcrossRestart(t, e.open(t)) })
	}
}

func syslogAcrossRestart(t *testing.T, db store) {
	rcv := listen(t, "127.0.0.1:0", nil)
	addr := rcv.ln.Addr().String()
	sink, err := siem.ParseSink(t.Context(), "syslog+tcp://"+addr, options(loopback(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	reg := prometheus.NewRegistry()
	p := &siem.Pusher{Store: db, Batch: 7, Owner: "replica-a", Metrics: siem.NewMetrics(reg)}

	appendN(t, db, "acme", 20)
	appendN(t, db, "globex", 3)
	if err := drain(t, p, sink); err != nil {
		t.Fatal(err)
	}
	got := seqsByTenant(rcv.events(t))
	inOrder(t, "acme", got["acme"], 20)
	inOrder(t, "globex", got["globex"], 3)

	// The receiver goes away: passes fail, records made meanwhile wait.
	rcv.stop()
	appendN(t, db, "acme", 5)
	if err := drain(t, p, sink); err == nil {
		t.Fatal("a pass to a stopped receiver succeeded")
	}
	if lag := gauge(t, reg, "agentplane_audit_sink_lag_records"); lag != 5 {
		t.Errorf("lag while the receiver is down: %v, want 5", lag)
	}
	cursors, err := db.SinkCursors(t.Context(), sink.Name())
	if err != nil || cursors["acme"] != 20 {
		t.Fatalf("cursor after a failed pass: %v (%v), want acme at 20", cursors, err)
	}
	// It comes back on the same port: they arrive, in order.
	back := listen(t, addr, nil)
	if err := drain(t, p, sink); err != nil {
		t.Fatal(err)
	}
	if lag := gauge(t, reg, "agentplane_audit_sink_lag_records"); lag != 0 {
		t.Errorf("lag once caught up: %v, want 0", lag)
	}
	got = seqsByTenant(back.events(t))
	if len(got["acme"]) == 0 || got["acme"][0] != 21 {
		t.Fatalf("after the restart acme sent %v, want from 21", got["acme"])
	}
	inOrder(t, "acme", append(seqsByTenant(rcv.events(t))["acme"], got["acme"]...), 25)
}

func TestSinkLeaseLetsOneReplicaPush(t *testing.T) {
	db := sqlite.NewTestDB(t)
	rcv := listen(t, "127.0.0.1:0", nil)
	c := loopback(t)
	a, err := siem.ParseSink(t.Context(), "syslog+tcp://"+rcv.ln.Addr().String(), options(c))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := siem.ParseSink(t.Context(), "syslog+tcp://"+rcv.ln.Addr().String(), options(c))
	defer a.Close()
	defer b.Close()
	appendN(t, db, "acme", 5)
	pa := &siem.Pusher{Store: db, Owner: "replica-a", Sinks: []siem.Sink{a}}
	pb := &siem.Pusher{Store: db, Owner: "replica-b"}
	if err := drain(t, pa, a); err != nil {
		t.Fatal(err)
	}
	appendN(t, db, "acme", 5)
	if err := drain(t, pb, b); err != nil {
		t.Fatal(err)
	}
	if n := len(rcv.events(t)); n != 5 {
		t.Fatalf("replica-b pushed while replica-a held the lease: %d received", n)
	}
	// replica-a stops and releases the lease: replica-b goes on from the cursor.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	pa.Run(ctx)
	if err := drain(t, pb, b); err != nil {
		t.Fatal(err)
	}
	inOrder(t, "acme", seqsByTenant(rcv.events(t))["acme"], 10)
}

// selfSigned writes the CA file of a TLS server's certificate.
func caFile(t *testing.T, cert *tls.Certificate) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSyslogTLSSink(t *testing.T) {
	db := sqlite.NewTestDB(t)
	srv := httptest.NewUnstartedServer(nil) // for its loopback certificate
	srv.StartTLS()
	cert := srv.TLS.Certificates[0]
	srv.Close()
	rcv := listen(t, "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	url := "syslog+tls://" + rcv.ln.Addr().String()

	o := options(loopback(t))
	untrusted, err := siem.ParseSink(t.Context(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	defer untrusted.Close()
	appendN(t, db, "acme", 3)
	p := &siem.Pusher{Store: db, Owner: "a"}
	if err := drain(t, p, untrusted); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a receiver with an unknown certificate: %v", err)
	}
	o.CAFile = caFile(t, &cert)
	sink, err := siem.ParseSink(t.Context(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := drain(t, p, sink); err != nil {
		t.Fatal(err)
	}
	inOrder(t, "acme", seqsByTenant(rcv.events(t))["acme"], 3)
}

func TestHTTPSSinkSignsNDJSONBatches(t *testing.T) {
	db := sqlite.NewTestDB(t)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		seqs   []int64
		fail   = true
		bodies int
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Verify(body, r.Header); err != nil {
			t.Errorf("signature: %v", err)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("Content-Type %q", ct)
		}
		mu.Lock()
		defer mu.Unlock()
		bodies++
		if fail {
			fail = false
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
			var e siem.Event
			if err := json.Unmarshal(line, &e); err != nil {
				t.Errorf("line %s: %v", line, err)
			}
			seqs = append(seqs, e.Metadata.Sequence)
		}
	}))
	defer srv.Close()
	cert := srv.TLS.Certificates[0]

	o := options(loopback(t))
	if _, err := siem.ParseSink(t.Context(), srv.URL+"/ingest", o); err == nil || !strings.Contains(err.Error(), "--audit-sink-secret-ref") {
		t.Fatalf("an https sink without a secret: %v", err)
	}
	o.Secret, o.CAFile = secret, caFile(t, &cert)
	sink, err := siem.ParseSink(t.Context(), srv.URL+"/ingest?token=x", o)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if strings.Contains(sink.Name(), "token") {
		t.Errorf("the sink's name %q holds its query", sink.Name())
	}
	appendN(t, db, "acme", 12)
	p := &siem.Pusher{Store: db, Owner: "a", Batch: 5}
	if err := drain(t, p, sink); err == nil {
		t.Fatal("a 503 counted as delivered")
	}
	if err := drain(t, p, sink); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; !slices.Equal(seqs, want) || bodies != 4 {
		t.Errorf("received %v in %d requests, want %v in 1 refused and 3 batches", seqs, bodies, want)
	}
}

func TestParseSinkRefusals(t *testing.T) {
	strict := outbound.New(outbound.Options{})
	for _, tc := range []struct{ url, want string }{
		{"udp://127.0.0.1:514", `unknown scheme "udp": use one of syslog+tcp, syslog+tls, https`},
		{"http://siem.example/ingest", `unknown scheme "http"`},
		{"syslog+tcp://siem.example", "with a port"},
		{"syslog+tcp://127.0.0.1:514", "loopback"},
		{"syslog+tls://10.0.0.7:6514", "private"},
		{"syslog+tcp://user:pw@siem.example:514", "credentials"},
		{"not a url", "not a URL"},
	} {
		_, err := siem.ParseSink(t.Context(), tc.url, options(strict))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.url, err, tc.want)
		}
	}
}
