package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
)

// Delivery defaults.
const (
	DefaultTimeout = 10 * time.Second
	DefaultTick    = time.Second
	// MaxResponseBytes is how much of a receiver's answer is read.
	MaxResponseBytes = 64 << 10
	firstBackoff     = 5 * time.Second
	maxBackoff       = time.Hour
)

// Deliverer sends due deliveries. Every replica runs one; a lease per
// delivery keeps two from sending the same attempt at once, and a lease
// that lapses (its replica died mid-attempt) lets another send it again:
// receivers dedupe on webhook-id.
type Deliverer struct {
	Store    Store
	Webhooks interface {
		Webhook(ctx context.Context, tenant, id string) (*Webhook, error)
	}
	// HTTP sends the requests: the outbound client under the SSRF rules.
	// Redirects are not followed whatever its policy.
	HTTP *http.Client
	// Owner names this replica in leases; default a new id.
	Owner string
	// Timeout bounds an attempt (DefaultTimeout); Lease is how long a
	// claimed delivery is held (default twice Timeout and 5 s).
	Timeout time.Duration
	Lease   time.Duration
	// Backoff is the wait after a failed attempt n (default Backoff).
	Backoff func(n int) time.Duration
	// Format makes the body sent to wh from the body queued (and signs
	// what it answers) with its media type ("" for application/json);
	// nil sends the queued body.
	Format func(wh *Webhook, body []byte) (formatted []byte, mediaType string, err error)
	// Tick is how often Run looks for due deliveries (DefaultTick).
	Tick time.Duration
	// Batch is how many deliveries one pass claims (default 128).
	Batch  int
	Now    func() time.Time
	Logger *slog.Logger

	once sync.Once
	// wake has Run look for due deliveries before its next tick.
	wake chan struct{}
}

func (d *Deliverer) init() {
	d.once.Do(func() {
		d.wake = make(chan struct{}, 1)
		if d.Owner == "" {
			d.Owner = ids.New("dlv_")
		}
		if d.Timeout <= 0 {
			d.Timeout = DefaultTimeout
		}
		if d.Lease <= 0 {
			d.Lease = 2*d.Timeout + 5*time.Second
		}
		if d.Backoff == nil {
			d.Backoff = Backoff
		}
		if d.Tick <= 0 {
			d.Tick = DefaultTick
		}
		if d.Batch <= 0 {
			d.Batch = 128
		}
		if d.Now == nil {
			d.Now = time.Now
		}
		if d.Logger == nil {
			d.Logger = slog.Default()
		}
		if d.HTTP == nil {
			d.HTTP = &http.Client{}
		}
		c := *d.HTTP
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		c.Timeout = d.Timeout
		d.HTTP = &c
	})
}

// Run sends due deliveries every tick until ctx is done.
func (d *Deliverer) Run(ctx context.Context) {
	d.init()
	t := time.NewTicker(d.Tick)
	defer t.Stop()
	for {
		for {
			n, err := d.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				d.Logger.Warn("webhook delivery pass failed", "error", err)
			}
			if n < d.Batch || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
	}
}

// Wake has Run look for due deliveries now rather than at its next tick:
// this replica has just queued one (a workflow it ran ended). It never
// blocks; wakes while a pass runs make one more pass.
func (d *Deliverer) Wake() {
	d.init()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// RunOnce claims due deliveries and sends them, in parallel across
// webhooks and order keys (a claim holds at most one of each), and
// returns how many it claimed.
func (d *Deliverer) RunOnce(ctx context.Context) (int, error) {
	d.init()
	now := d.Now()
	batch, err := d.Store.ClaimDeliveries(ctx, d.Owner, now, now.Add(d.Lease), d.Batch)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, dl := range batch {
		wg.Go(func() { d.attempt(ctx, dl) })
	}
	wg.Wait()
	return len(batch), ctx.Err()
}

// attempt sends one delivery once and records the outcome.
func (d *Deliverer) attempt(ctx context.Context, dl *Delivery) {
	wh, err := d.Webhooks.Webhook(ctx, dl.Tenant, dl.WebhookID)
	if err != nil {
		if ctx.Err() == nil {
			d.Logger.Warn("webhook of a delivery not readable", "delivery", dl.ID, "error", err)
		}
		return // the lease lapses and the delivery is tried again
	}
	status, sendErr := d.send(ctx, wh, dl)
	if ctx.Err() != nil {
		return // shutting down: the lease lapses and another replica sends it
	}
	now := d.Now()
	o := Outcome{Attempts: dl.Attempts + 1, HTTPStatus: status, At: now}
	switch {
	case sendErr == nil:
		o.Status = Delivered
	case now.Sub(dl.CreatedAt) >= RetryFor:
		o.Status, o.Error = Failed, sendErr.Error()
	default:
		o.Status, o.Error, o.NextAttempt = Pending, sendErr.Error(), now.Add(d.Backoff(o.Attempts))
	}
	if _, err := d.Store.FinishAttempt(context.WithoutCancel(ctx), d.Owner, dl.ID, o); err != nil {
		d.Logger.Warn("webhook attempt not recorded", "delivery", dl.ID, "error", err)
	}
}

// send POSTs a delivery and returns the answer's status: nil error for a
// 2xx. The answer's body is read up to MaxResponseBytes and dropped.
func (d *Deliverer) send(ctx context.Context, wh *Webhook, dl *Delivery) (int, error) {
	body, mediaType := []byte(dl.Body), ""
	if d.Format != nil {
		var err error
		if body, mediaType, err = d.Format(wh, body); err != nil {
			return 0, fmt.Errorf("format: %w", err)
		}
	}
	if mediaType == "" {
		mediaType = "application/json"
	}
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	ts := d.Now()
	req.Header.Set("Content-Type", mediaType)
	req.Header.Set("User-Agent", "agentplane-webhooks")
	req.Header.Set("webhook-id", dl.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", wh.Signatures(dl.ID, ts, body))
	resp, err := d.HTTP.Do(req)
	if err != nil {
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			return 0, fmt.Errorf("no answer within %s", d.Timeout)
		}
		var pe *problem.Error
		if errors.As(err, &pe) {
			// A refused address: its detail alone, as the dial's error
			// names the address the receiver's host name resolved to.
			return 0, fmt.Errorf("send: %s", pe.Detail)
		}
		return 0, fmt.Errorf("send: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, fmt.Errorf("answered %d (redirects are not followed: register the final URL)", resp.StatusCode)
	}
	return resp.StatusCode, fmt.Errorf("answered %d", resp.StatusCode)
}

// Backoff is the wait before attempt n+1: 5 s doubled per attempt up to an
// hour, with full jitter over its upper half.
func Backoff(n int) time.Duration {
	b := firstBackoff << min(max(n-1, 0), 20)
	if b > maxBackoff || b <= 0 {
		b = maxBackoff
	}
	return b/2 + rand.N(b/2+1)
}
