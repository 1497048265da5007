package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/internal/netfault"
)

// publicURL is every replica's public URL: the issuer of the tokens, which
// must be one for a token to be good at every replica.
const publicURL = "http://agentplane.harness.test"

// tenant is the harness's tenant.
const tenant = "harness"

const scopes = "tools:read tools:write agents:write agents:invoke workflows:read workflows:replay audit:read tool:*"

// cluster is the replicas, the proxies in front of their database and of
// Redis, and the client that spreads requests over the replicas.
type cluster struct {
	bin      string
	tmp      string
	dbURL    string
	log      io.Writer
	dbProxy  []*netfault.Proxy
	redis    *netfault.Proxy
	redisURL string

	mu       sync.Mutex
	replicas []*benchserver.Server

	token string
	http  *http.Client
	next  atomic.Int64
}

func startCluster(ctx context.Context, o options, bin, tmp, dbURL string, log io.Writer) (*cluster, error) {
	c := &cluster{bin: bin, tmp: tmp, dbURL: dbURL, log: log, replicas: make([]*benchserver.Server, o.replicas)}
	dbHost, err := hostOf(dbURL)
	if err != nil {
		return nil, err
	}
	redisHost, err := hostOf(o.redisURL)
	if err != nil {
		return nil, err
	}
	if c.redis, err = netfault.Listen(redisHost); err != nil {
		return nil, err
	}
	if c.redisURL, err = proxied(o.redisURL, c.redis); err != nil {
		return nil, err
	}
	for range o.replicas {
		p, err := netfault.Listen(dbHost)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.dbProxy = append(c.dbProxy, p)
	}
	for i := range o.replicas {
		if err := c.start(ctx, i); err != nil {
			c.stop()
			return nil, err
		}
	}
	c.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return c, nil
}

// start (re)starts replica i, its database connections through its proxy.
func (c *cluster) start(ctx context.Context, i int) error {
	db, err := proxied(c.dbURL, c.dbProxy[i])
	if err != nil {
		return err
	}
	srv, err := benchserver.Start(ctx, benchserver.Config{Binary: c.bin, Data: replicaDir(c.tmp, i), DatabaseURL: db,
		Args: []string{"--redis-url", c.redisURL, "--public-url", publicURL, "--workflow-lease", "2s",
			"--shutdown-timeout", "3s"}})
	if err != nil {
		return fmt.Errorf("start replica %d: %w", i, err)
	}
	c.mu.Lock()
	c.replicas[i] = srv
	c.mu.Unlock()
	return nil
}

func (c *cluster) stop() {
	c.mu.Lock()
	rs := append([]*benchserver.Server(nil), c.replicas...)
	c.mu.Unlock()
	for _, r := range rs {
		if r != nil {
			r.Stop()
		}
	}
	for _, p := range c.dbProxy {
		p.Close()
	}
	if c.redis != nil {
		c.redis.Close()
	}
}

// replica returns the next replica in turn.
func (c *cluster) replica() *benchserver.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas[int(c.next.Add(1))%len(c.replicas)]
}

// setup mints the token, registers the tool service and deploys the agent.
func (c *cluster) setup(ctx context.Context, tools *toolService) error {
	tok, err := benchserver.Token(ctx, c.bin, "--public-url", publicURL, "--database-url", c.dbURL,
		"--tenant", tenant, "--scope", scopes, "--ttl", "2h")
	if err != nil {
		return err
	}
	c.token = tok
	reg := map[string]any{"name": "shop", "type": "openapi", "spec": tools.spec(), "idempotency_support": true}
	if r := c.send(ctx, "setup", "POST", "/v1/tools", reg, "setup-tool"); r.status != http.StatusCreated {
		return fmt.Errorf("register the tool service: %d %s %v", r.status, r.body, r.err)
	}
	dep := map[string]any{"name": agentName, "definition": json.RawMessage(agentDefinition)}
	if r := c.send(ctx, "setup", "POST", "/v1/agents", dep, "setup-agent"); r.status != http.StatusCreated {
		return fmt.Errorf("deploy the agent: %d %s %v", r.status, r.body, r.err)
	}
	return nil
}

// answer is one request's outcome after its re-sends.
type answer struct {
	status   int
	body     []byte
	err      error
	attempts []attempt
}

// attempt is one send of a request: the status (0 when no answer came) and
// how long it took.
type attempt struct {
	status int
	took   time.Duration
}

// maxAttempts bounds the sends of one request.
const maxAttempts = 8

// send sends a request to the replicas in turn until one answers below
// 500, re-sending with the same Idempotency-Key (key) after a failed
// connection, a 5xx, or a 409 saying the key's first request is still in
// flight (as after the replica that took it was killed).
func (c *cluster) send(ctx context.Context, kind, method, path string, body any, key string) answer {
	var data []byte
	if body != nil {
		data, _ = json.Marshal(body)
	}
	var a answer
	for i := range maxAttempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				a.err = ctx.Err()
				return a
			case <-time.After(time.Duration(i) * 150 * time.Millisecond):
			}
		}
		start := time.Now()
		a.status, a.body, a.err = c.once(ctx, c.replica(), method, path, data, key)
		a.attempts = append(a.attempts, attempt{status: a.status, took: time.Since(start)})
		if a.err == nil && a.status < 500 && !(a.status == http.StatusConflict && key != "") {
			return a
		}
	}
	return a
}

func (c *cluster) once(ctx context.Context, srv *benchserver.Server, method, path string, data []byte, key string) (int, []byte, error) {
	var rd io.Reader
	if data != nil {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, srv.BaseURL()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, body, err
}

// fault is one fault injected, for the report.
type fault struct {
	at   time.Duration
	what string
}

// inject runs the faults over the load's duration d and sends the list of
// those injected once done.
func (c *cluster) inject(ctx context.Context, d time.Duration, tools *toolService) <-chan []fault {
	out := make(chan []fault, 1)
	start := time.Now()
	var fired []fault
	at := func(frac float64) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(start.Add(time.Duration(frac * float64(d))))):
			return true
		}
	}
	note := func(what string) {
		fired = append(fired, fault{time.Since(start).Round(100 * time.Millisecond), what})
		fmt.Fprintf(c.log, "  %v: %s\n", time.Since(start).Round(100*time.Millisecond), what)
	}
	go func() {
		defer func() { out <- fired }()
		last := len(c.replicas) - 1
		if !at(0.2) {
			return
		}
		c.mu.Lock()
		victim := c.replicas[last]
		c.mu.Unlock()
		victim.Kill()
		note(fmt.Sprintf("replica %d killed (SIGKILL)", last))
		if !at(0.3) {
			return
		}
		if err := c.start(ctx, last); err != nil {
			note(fmt.Sprintf("replica %d failed to restart: %v", last, err))
		} else {
			note(fmt.Sprintf("replica %d restarted", last))
		}
		if !at(0.45) {
			return
		}
		c.dbProxy[0].Cut()
		note("replica 0's database connections cut")
		if !at(0.55) {
			return
		}
		c.dbProxy[0].Restore()
		note("replica 0's database connections restored")
		if !at(0.65) {
			return
		}
		c.redis.Cut()
		note("Redis cut for every replica")
		if !at(0.72) {
			return
		}
		c.redis.Restore()
		note("Redis restored")
		if !at(0.78) {
			return
		}
		tools.misbehave(true)
		note("tool service stalls 1 s on every 10th read and answers 500 to every 7th")
		if !at(0.9) {
			return
		}
		tools.misbehave(false)
		note("tool service healthy again")
	}()
	return out
}
