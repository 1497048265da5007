package llm

import (
	"context"
	"crypto/x509"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/llm/llmtest"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
)

// completeAtOnce asks c for n completions at once and fails the test on
// any error.
func completeAtOnce(t *testing.T, c Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if _, err := c.Complete(context.Background(), conversation()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// protocols are the HTTP major versions of srv's requests.
func protocols(srv *llmtest.Server) map[int]int {
	got := map[int]int{}
	for _, r := range srv.Requests() {
		got[r.ProtoMajor]++
	}
	return got
}

// TestH2CModelSharesOneConnection: a model with http2_prior_knowledge
// against a server speaking only unencrypted HTTP/2 sends its completions
// in flight together as streams of one connection, in both wire formats.
func TestH2CModelSharesOneConnection(t *testing.T) {
	const n = 8
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			// Each answer waits, so all n are in flight at once.
			srv := p.newServer(t, func(llmtest.Request) llmtest.Answer {
				return llmtest.Answer{Text: "done", Delay: 200 * time.Millisecond}
			}, llmtest.H2C())
			m := testModel(p.name, srv)
			m.HTTP2PriorKnowledge = true
			completeAtOnce(t, newClient(t, testOptions(t), m), n)
			if got := protocols(srv); got[2] != n {
				t.Errorf("requests by HTTP major version %v, want all %d over HTTP/2", got, n)
			}
			if c := srv.Conns(); c != 1 {
				t.Errorf("%d completions in flight took %d connections, want 1", n, c)
			}
		})
	}
}

// TestHTTP1ModelKeepsHTTP1: without the setting, an http:// model speaks
// HTTP/1.1, a connection per completion in flight, to a server that speaks
// nothing else.
func TestHTTP1ModelKeepsHTTP1(t *testing.T) {
	const n = 4
	srv := llmtest.NewOpenAIServer(t, func(llmtest.Request) llmtest.Answer {
		return llmtest.Answer{Text: "done", Delay: 200 * time.Millisecond}
	})
	completeAtOnce(t, newClient(t, testOptions(t), testModel(model.OpenAI, srv)), n)
	if got := protocols(srv); got[1] != n {
		t.Errorf("requests by HTTP major version %v, want all %d over HTTP/1", got, n)
	}
	if c := srv.Conns(); c != n {
		t.Errorf("%d completions in flight took %d connections, want %d", n, c, n)
	}
}

// TestH2CModelAgainstHTTP1Server: prior knowledge against a server that
// speaks only HTTP/1.1 fails the completion, saying to turn it off: as
// an HTTP/1.1 answer to the preface, or, where the server closed the
// connection before that answer was read, as a request that failed.
func TestH2CModelAgainstHTTP1Server(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("done")))
	m := testModel(model.OpenAI, srv)
	m.HTTP2PriorKnowledge = true
	_, err := newClient(t, testOptions(t), m).Complete(context.Background(), conversation())
	le := llmError(t, err)
	if !strings.Contains(le.Message, "turn http2_prior_knowledge off") {
		t.Errorf("error %q does not say to turn http2_prior_knowledge off", le.Message)
	}
}

// TestHTTPSModelNegotiatesHTTP2: an https:// model speaks HTTP/2 when the
// server offers it in the TLS handshake (ALPN), the setting off: once a
// connection is up, the completions in flight share it.
func TestHTTPSModelNegotiatesHTTP2(t *testing.T) {
	const n = 4
	srv := llmtest.NewOpenAIServer(t, func(llmtest.Request) llmtest.Answer {
		return llmtest.Answer{Text: "done", Delay: 200 * time.Millisecond}
	}, llmtest.TLS())
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	opts := testOptions(t)
	opts.Outbound = outbound.New(outbound.Options{AllowPrivate: true, RootCAs: roots})
	c := newClient(t, opts, testModel(model.OpenAI, srv))
	completeAtOnce(t, c, 1)
	completeAtOnce(t, c, n)
	if got := protocols(srv); got[2] != n+1 {
		t.Errorf("requests by HTTP major version %v, want all %d over HTTP/2", got, n+1)
	}
	if c := srv.Conns(); c != 1 {
		t.Errorf("%d completions in flight took %d connections, want 1", n, c)
	}
}

// TestH2CModelUnderAddressPolicy: the h2c transport dials under the same
// address policy: a loopback model is refused when private networks are
// not allowed, and nothing reaches it.
func TestH2CModelUnderAddressPolicy(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("done")), llmtest.H2C())
	m := testModel(model.OpenAI, srv)
	m.HTTP2PriorKnowledge = true
	opts := testOptions(t)
	opts.Outbound = outbound.New(outbound.Options{})
	_, err := newClient(t, opts, m).Complete(context.Background(), conversation())
	if le := llmError(t, err); !strings.Contains(le.Message, "refused") {
		t.Errorf("error %q, want the address refused", le.Message)
	}
	if srv.Conns() != 0 || srv.Count() != 0 {
		t.Errorf("the refused model got %d connections and %d requests", srv.Conns(), srv.Count())
	}
}
