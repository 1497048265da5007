package siem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/webhook"
)

// httpsSink POSTs each batch as NDJSON, signed as webhooks are (Standard
// Webhooks: webhook-id, webhook-timestamp, webhook-signature), so a
// receiver checks it with any Standard Webhooks library.
type httpsSink struct {
	name, url string
	client    *http.Client
	secret    string
}

func (s *httpsSink) Name() string { return s.name }

func (s *httpsSink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// Send POSTs the batch; a 2xx answer is its acknowledgement. Its
// webhook-id names the tenant and the seqs it holds, so a receiver
// dedupes a batch sent again.
func (s *httpsSink) Send(ctx context.Context, b Batch) error {
	body := b.NDJSON()
	id := fmt.Sprintf("audit_%s_%d_%d", b.Tenant, b.FirstSeq, b.LastSeq)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	ts := time.Now()
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("User-Agent", "agentplane-audit")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", webhook.Sign(s.secret, id, ts, body))
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhook.MaxResponseBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}
