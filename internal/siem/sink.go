package siem

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Sink schemes.
const (
	SchemeSyslogTCP = "syslog+tcp"
	SchemeSyslogTLS = "syslog+tls"
	SchemeHTTPS     = "https"
)

// Schemes lists the schemes --audit-sink accepts.
var Schemes = []string{SchemeSyslogTCP, SchemeSyslogTLS, SchemeHTTPS}

// DefaultSendTimeout bounds one batch's delivery.
const DefaultSendTimeout = 10 * time.Second

// Sink is one destination of the audit log.
type Sink interface {
	// Name is the sink's key in the store and its metrics label: its URL
	// without query or credentials.
	Name() string
	// Send delivers one tenant's batch in order. nil means every event was
	// handed over as far as the protocol can tell; on an error the batch
	// is sent again from its start (at least once).
	Send(ctx context.Context, b Batch) error
	// Close drops the sink's connection.
	Close() error
}

// SinkOptions are what every sink is built with.
type SinkOptions struct {
	// Dial dials under the outbound address policy (the outbound
	// client's DialContext).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// CheckHost refuses, at start-up, an address the policy refuses
	// (the outbound client's CheckHost, given an https URL).
	CheckHost func(ctx context.Context, rawURL string) error
	// CAFile adds a PEM CA bundle to the system roots for syslog+tls and
	// https sinks.
	CAFile string
	// Secret signs https batches (Standard Webhooks); required for them.
	Secret string
	// Timeout bounds one batch (DefaultSendTimeout).
	Timeout time.Duration
	// Hostname is the syslog HOSTNAME (default os.Hostname).
	Hostname string
}

// ParseSink builds the sink of one --audit-sink value: syslog+tcp://HOST:PORT,
// syslog+tls://HOST:PORT or an https:// URL. Its errors name what to fix.
func ParseSink(ctx context.Context, raw string, o SinkOptions) (Sink, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Scheme == "" {
		return nil, fmt.Errorf("%q is not a URL: use one of %s://HOST:PORT", raw, strings.Join(Schemes, "://, "))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q must not hold credentials (an https sink's secret comes from --audit-sink-secret-ref)", raw)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultSendTimeout
	}
	var roots *x509.CertPool
	if u.Scheme == SchemeSyslogTLS || u.Scheme == SchemeHTTPS {
		if roots, err = rootCAs(o.CAFile); err != nil {
			return nil, err
		}
	}
	switch u.Scheme {
	case SchemeSyslogTCP, SchemeSyslogTLS:
		if u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("%q: a syslog sink is %s://HOST:PORT, with a port and nothing after it", raw, u.Scheme)
		}
		if err := checkHost(ctx, o, u.Host); err != nil {
			return nil, fmt.Errorf("%q: %w", raw, err)
		}
		s := &syslogSink{name: u.Scheme + "://" + u.Host, addr: u.Host, dial: o.Dial, timeout: o.Timeout,
			hostname: o.Hostname, procID: fmt.Sprint(os.Getpid())}
		if s.hostname == "" {
			s.hostname, _ = os.Hostname()
		}
		if u.Scheme == SchemeSyslogTLS {
			s.tls = &tls.Config{RootCAs: roots, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
		}
		return s, nil
	case SchemeHTTPS:
		if o.Secret == "" {
			return nil, fmt.Errorf("%q: an https sink signs its batches: give --audit-sink-secret-ref", raw)
		}
		if err := checkHost(ctx, o, u.Host); err != nil {
			return nil, fmt.Errorf("%q: %w", raw, err)
		}
		tr := &http.Transport{
			Proxy:               nil,
			DialContext:         o.Dial,
			TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout: o.Timeout,
			IdleConnTimeout:     90 * time.Second,
		}
		c := &http.Client{Transport: tr, Timeout: o.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		name := *u
		name.RawQuery, name.Fragment = "", ""
		return &httpsSink{name: name.String(), url: raw, client: c, secret: o.Secret}, nil
	}
	return nil, fmt.Errorf("%q: unknown scheme %q: use one of %s", raw, u.Scheme, strings.Join(Schemes, ", "))
}

// checkHost refuses an address the outbound policy refuses.
func checkHost(ctx context.Context, o SinkOptions, host string) error {
	if o.CheckHost == nil {
		return nil
	}
	return o.CheckHost(ctx, "https://"+host)
}

// rootCAs is the system's roots and, when given, the CA file's.
func rootCAs(caFile string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile == "" {
		return pool, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--audit-sink-ca-file: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--audit-sink-ca-file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}
