// Package outbound is the one hardened HTTP client for every request
// agentplane makes to the outside: spec fetches, GraphQL introspection, tool
// calls, OAuth token requests and Vault. It checks the address actually
// dialled (after DNS, on every redirect) against the address policy, ignores
// proxy settings, limits redirects and sizes, propagates W3C trace context,
// and adds a call's credentials beneath the tracing, so spans never see them.
package outbound

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/telemetry"
)

// Defaults of Options.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxRedirects = 5
	DefaultMaxBytes     = 32 << 20
	DefaultUserAgent    = "agentplane"
)

// Options configures a Client.
type Options struct {
	// AllowPrivate allows loopback, private, link-local and metadata
	// addresses (--allow-private-networks).
	AllowPrivate bool
	// AllowFile allows file:// URLs in Fetch (--allow-file-specs).
	AllowFile bool
	// Timeout bounds Fetch and requests made through HTTPClient; default 10s.
	Timeout time.Duration
	// MaxRedirects is how many redirects a request may follow; default 5.
	MaxRedirects int
	// MaxBytes limits what Fetch reads; default 32 MiB.
	MaxBytes int64
	// UserAgent is sent on Fetch requests; default "agentplane".
	UserAgent string
	// AllowHosts are private hosts allowed without AllowPrivate
	// (--allow-private-host).
	AllowHosts []AllowedHost
	// Allow, when set, replaces the address policy (and AllowPrivate): it
	// sees every address dialled and refuses it by returning an error.
	Allow func(netip.AddrPort) error
	// Resolver looks host names up for CheckHost; default
	// net.DefaultResolver. Requests resolve through the system's resolver
	// whatever it is.
	Resolver Resolver
	// RootCAs are the certificate authorities https servers are checked
	// against; default the system's.
	RootCAs *x509.CertPool
}

// Resolver looks a host name up (*net.Resolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Client makes outgoing requests under the address policy.
type Client struct {
	opts      Options
	transport http.RoundTripper
	// h2c is transport speaking HTTP/2 with prior knowledge to http://
	// URLs (H2CHTTPClient).
	h2c  http.RoundTripper
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New returns a client with opts, defaults filled in.
func New(opts Options) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxRedirects <= 0 {
		opts.MaxRedirects = DefaultMaxRedirects
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	c := &Client{opts: opts}
	dialer := &net.Dialer{
		Timeout:        opts.Timeout,
		KeepAlive:      30 * time.Second,
		ControlContext: c.control,
	}
	c.dial = c.dialContext(dialer)
	c.transport = c.newTransport(nil, 0)
	// Unencrypted HTTP/2 needs HTTP/1 off: the transport then starts
	// HTTP/2 with prior knowledge on every http:// connection; https
	// still negotiates HTTP/2 by ALPN. Of HTTP/2 connections,
	// MaxConnsPerHost bounds the dials in progress, not the connections
	// (one at the server's limit of streams gets another): without it, as
	// many requests as arrive at once before the first connection is up
	// would each dial one.
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true)
	h2c.SetHTTP2(true)
	c.h2c = c.newTransport(h2c, 1)
	return c
}

// newTransport returns a transport dialling under the address policy, with
// credentials applied beneath tracing, speaking protocols (nil: HTTP/1.1,
// and HTTP/2 where TLS negotiates it), with maxConnsPerHost.
func (c *Client) newTransport(protocols *http.Protocols, maxConnsPerHost int) http.RoundTripper {
	base := &http.Transport{
		MaxConnsPerHost:   maxConnsPerHost,
		Proxy:             nil, // a proxy would dial on our behalf, past the check
		DialContext:       c.dial,
		ForceAttemptHTTP2: true,
		Protocols:         protocols,
		// Many workflows call the same business API or model at once;
		// keeping their connections saves a dial (and a TLS handshake)
		// per call: a workflow's next completion reuses the connection
		// of its last. Idle connections close after IdleConnTimeout.
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if protocols != nil && protocols.UnencryptedHTTP2() {
		// An h2c connection carries all the requests in flight to its
		// host: one that has gone silent is pinged, and closed when no
		// answer comes, rather than holding each of its requests to its
		// time-out.
		base.HTTP2 = &http.HTTP2Config{SendPingTimeout: 30 * time.Second}
	}
	if c.opts.RootCAs != nil {
		base.TLSClientConfig = &tls.Config{RootCAs: c.opts.RootCAs, MinVersion: tls.VersionTLS12}
	}
	// Credentials are applied under the tracing transport: its client span
	// records the full URL, and a query parameter may be an API key.
	return telemetry.Transport(credentialTransport{base: base})
}

// DialContext dials a TCP connection under the address policy, as every
// request of the client does: for protocols other than HTTP (syslog).
func (c *Client) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.dial(ctx, network, addr)
}

// Options returns the client's options with defaults filled in.
func (c *Client) Options() Options { return c.opts }

// control runs for every connection after DNS resolution, with the address
// about to be dialled.
func (c *Client) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return problem.New(problem.URLNotAllowed, "cannot check address %q", address)
	}
	if c.opts.Allow == nil && ctx.Value(allowedNameKey{}) != nil {
		return nil // the request named a host the operator allowed
	}
	err = c.checkAddrPort(ap)
	if name, ok := ctx.Value(dialNameKey{}).(string); ok && problem.Is(err, problem.URLNotAllowed) {
		return ResolvesPrivate(name)
	}
	return err
}

func (c *Client) checkAddrPort(ap netip.AddrPort) error {
	switch {
	case c.opts.Allow != nil:
		return c.opts.Allow(ap)
	case c.opts.AllowPrivate, c.allowedAddr(ap):
		return nil
	default:
		return CheckAddr(ap.Addr())
	}
}

// CheckURL checks what can be checked of a URL before any request: its
// scheme (http or https; file only when allowFile and Options.AllowFile are
// both true), cloud metadata service names, and a literal IP host. Its errors
// are problem.URLNotAllowed. Registration can call it to refuse a URL early;
// the dialer checks the resolved address again on every request.
func (c *Client) CheckURL(rawURL string, allowFile bool) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, problem.New(problem.URLNotAllowed, "the URL cannot be parsed")
	}
	switch u.Scheme {
	case "http", "https":
	case "file":
		if allowFile && c.opts.AllowFile {
			return u, nil
		}
		return nil, problem.New(problem.URLNotAllowed, "file:// URLs are not allowed")
	default:
		return nil, problem.New(problem.URLNotAllowed, "scheme %q is not allowed (use http or https)", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return nil, problem.New(problem.URLNotAllowed, "the URL has no host")
	}
	if c.opts.Allow == nil && !c.opts.AllowPrivate && isMetadataHost(host) {
		return nil, problem.New(problem.URLNotAllowed, "%s is a cloud metadata service", host)
	}
	if isLegacyIPv4(host) {
		return nil, problem.New(problem.URLNotAllowed, "%s is an IPv4 address in a legacy form (decimal, octal or hexadecimal); write it as four decimal numbers, such as 203.0.113.7", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		p, _ := netip.ParseAddrPort(net.JoinHostPort(ip.String(), port))
		if err := c.checkAddrPort(p); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// checkRedirect limits redirects and refuses redirects to other schemes; the
// dialer checks the address of the new location.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > c.opts.MaxRedirects {
		return problem.New(problem.SpecUnreachable, "more than %d redirects", c.opts.MaxRedirects)
	}
	if _, err := c.CheckURL(req.URL.String(), false); err != nil {
		return err
	}
	return nil
}

// HTTPClient returns a new *http.Client over the checked transport, with the
// redirect policy and Timeout. Each call returns a new value, so a library
// that changes its fields (Vault's sets CheckRedirect) changes only its own.
func (c *Client) HTTPClient() *http.Client { return c.httpClient(c.transport) }

// H2CHTTPClient is HTTPClient, but its requests to http:// URLs speak
// HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3): many requests in flight
// share one connection (more when the server limits the streams of one)
// instead of a connection each. A server that speaks only HTTP/1.1 fails
// every request. Requests to https:// URLs need the server to negotiate
// HTTP/2.
func (c *Client) H2CHTTPClient() *http.Client { return c.httpClient(c.h2c) }

func (c *Client) httpClient(transport http.RoundTripper) *http.Client {
	return &http.Client{
		Transport:     transport,
		CheckRedirect: c.checkRedirect,
		Timeout:       c.opts.Timeout,
	}
}

// Fetch GETs a spec document and returns its bytes and the URL it was finally
// read from (after redirects). Errors are *problem.Error: URLNotAllowed for a
// refused scheme or address, SpecUnreachable for an error status, a time-out,
// a name that does not resolve or too many redirects, SpecTooLarge over
// MaxBytes.
func (c *Client) Fetch(ctx context.Context, rawURL string) ([]byte, string, error) {
	return c.fetch(ctx, http.MethodGet, rawURL, nil, "application/json, application/yaml, application/xml, text/plain, */*")
}

// PostJSON POSTs body as JSON and reads the answer under the same address
// policy, time-out and size limit as Fetch (GraphQL introspection).
func (c *Client) PostJSON(ctx context.Context, rawURL string, body []byte) ([]byte, error) {
	data, _, err := c.fetch(ctx, http.MethodPost, rawURL, body, "application/json")
	return data, err
}

func (c *Client) fetch(ctx context.Context, method, rawURL string, body []byte, accept string) ([]byte, string, error) {
	u, err := c.CheckURL(rawURL, method == http.MethodGet)
	if err != nil {
		return nil, "", err
	}
	if u.Scheme == "file" {
		data, err := c.readFile(u)
		return data, u.String(), err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, "", problem.Wrap(problem.URLNotAllowed, err, "the URL cannot be requested")
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		return nil, "", FetchError(err, c.opts.Timeout)
	}
	defer resp.Body.Close()
	final := resp.Request.URL.String()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, final, problem.New(problem.SpecUnreachable, "the server answered %s", resp.Status)
	}
	if resp.ContentLength > c.opts.MaxBytes {
		return nil, final, c.tooLarge()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxBytes+1))
	if err != nil {
		return nil, final, FetchError(err, c.opts.Timeout)
	}
	if int64(len(data)) > c.opts.MaxBytes {
		return nil, final, c.tooLarge()
	}
	return data, final, nil
}

func (c *Client) tooLarge() error {
	return problem.New(problem.SpecTooLarge, "the document is over the size limit of %s", Size(c.opts.MaxBytes))
}

// Size writes a byte count for people: "32 MiB", "64 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// readFile reads a file:// document with the size limit.
func (c *Client) readFile(u *url.URL) ([]byte, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, problem.New(problem.URLNotAllowed, "file:// URLs must name a local absolute path")
	}
	f, err := os.Open(u.Path)
	if err != nil {
		return nil, problem.New(problem.SpecUnreachable, "cannot open %s", u.Path)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, c.opts.MaxBytes+1))
	if err != nil {
		return nil, problem.New(problem.SpecUnreachable, "cannot read %s", u.Path)
	}
	if int64(len(data)) > c.opts.MaxBytes {
		return nil, c.tooLarge()
	}
	return data, nil
}

// FetchError turns an error of an outgoing request into a *problem.Error: a
// *problem.Error in its chain (a refused address, too many redirects) is
// returned as is, anything else becomes SpecUnreachable with Reason.
func FetchError(err error, timeout time.Duration) error {
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe
	}
	return problem.Wrap(problem.SpecUnreachable, err, "%s", Reason(err, timeout))
}

// Reason says briefly why a request failed, in words fit for a client:
// a time-out, a name that does not resolve, a refused or reset connection.
func Reason(err error, timeout time.Duration) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	var opErr *net.OpError
	var pe *problem.Error
	switch {
	case errors.As(err, &pe):
		// A refused address: its detail, not the dial's (which names
		// the address a host name resolved to).
		return pe.Detail
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return fmt.Sprintf("the host name %s does not resolve", dnsErr.Name)
		}
		return fmt.Sprintf("the host name %s could not be resolved", dnsErr.Name)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		if timeout > 0 {
			return fmt.Sprintf("timed out after %s", timeout)
		}
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "the request was canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the connection was closed unexpectedly"
	case errors.As(err, &opErr):
		return "the connection failed: " + opErr.Err.Error()
	default:
		return "the request failed"
	}
}
