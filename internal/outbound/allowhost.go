package outbound

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// AllowedHost is one private host outgoing requests may reach without
// --allow-private-networks (--allow-private-host HOST[:PORT]): an IP
// address, matched against the address dialled, or a host name, whose
// addresses are allowed when a request names that host. Port 0 allows
// every port.
type AllowedHost struct {
	Name string
	Addr netip.Addr
	Port uint16
}

// ParseAllowedHost reads HOST[:PORT]: "127.0.0.1:11434", "[::1]:8000",
// "ollama.internal", "localhost:4000".
func ParseAllowedHost(s string) (AllowedHost, error) {
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	if host == "" {
		return AllowedHost{}, fmt.Errorf("%q: give HOST or HOST:PORT, such as 127.0.0.1:11434", s)
	}
	var a AllowedHost
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return AllowedHost{}, fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
		}
		a.Port = uint16(n)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		a.Addr = ip.WithZone("").Unmap()
		return a, nil
	}
	if isLegacyIPv4(host) || strings.ContainsAny(host, "/:@ ") {
		return AllowedHost{}, fmt.Errorf("%q: HOST must be a host name or an IP address in its usual form", s)
	}
	a.Name = strings.TrimSuffix(strings.ToLower(host), ".")
	return a, nil
}

// String writes the host as it was given, normalised.
func (a AllowedHost) String() string {
	host := a.Name
	if a.Addr.IsValid() {
		host = a.Addr.String()
	}
	if a.Port == 0 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(a.Port)))
}

func (a AllowedHost) portMatches(port uint16) bool { return a.Port == 0 || a.Port == port }

// allowedAddr reports whether ap is an allowed IP address and port.
func (c *Client) allowedAddr(ap netip.AddrPort) bool {
	ip := ap.Addr().WithZone("").Unmap()
	for _, a := range c.opts.AllowHosts {
		if a.Addr.IsValid() && a.Addr == ip && a.portMatches(ap.Port()) {
			return true
		}
	}
	return false
}

// allowedName reports whether host:port names an allowed host name.
func (c *Client) allowedName(host string, port uint16) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, a := range c.opts.AllowHosts {
		if a.Name != "" && a.Name == host && a.portMatches(port) {
			return true
		}
	}
	return false
}

// allowedNameKey marks the context of a dial to an allowed host name.
type allowedNameKey struct{}

// dialNameKey carries the host name a dial resolves, so that a refusal
// names the host rather than the address it resolved to.
type dialNameKey struct{}

// dialContext dials through dialer, telling the address check the host
// name the request named, and whether it is an allowed one.
func (c *Client) dialContext(dialer *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if _, err := netip.ParseAddr(host); err != nil {
				ctx = context.WithValue(ctx, dialNameKey{}, host)
			}
			if n, err := strconv.ParseUint(port, 10, 16); err == nil && len(c.opts.AllowHosts) > 0 && c.allowedName(host, uint16(n)) {
				ctx = context.WithValue(ctx, allowedNameKey{}, true)
			}
		}
		return dialer.DialContext(ctx, network, addr)
	}
}

// resolveTimeout bounds the look-up of CheckHost.
const resolveTimeout = 3 * time.Second

// CheckHost is CheckURL for a URL registered now and requested later (a
// model's base_url, a webhook's url): it also looks the host name up with
// Options.Resolver and refuses it when an address it resolves to is
// refused, saying so without the address. A name that does not resolve now
// is not refused (the request will say so); every request checks the
// address it dials again.
func (c *Client) CheckHost(ctx context.Context, rawURL string) error {
	u, err := c.CheckURL(rawURL, false)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // checked by CheckURL
	}
	port := defaultPort(u.Scheme, u.Port())
	if c.opts.Allow == nil && (c.opts.AllowPrivate || c.allowedName(host, port)) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := c.opts.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, ip := range addrs {
		if err := c.checkAddrPort(netip.AddrPortFrom(ip, port)); err != nil {
			if problem.Is(err, problem.URLNotAllowed) {
				return ResolvesPrivate(host)
			}
			return err
		}
	}
	return nil
}

// defaultPort is the URL's port, or its scheme's.
func defaultPort(scheme, port string) uint16 {
	if n, err := strconv.ParseUint(port, 10, 16); err == nil {
		return uint16(n)
	}
	if scheme == "https" {
		return 443
	}
	return 80
}

// IsAllowedHost reports whether the URL's host and port are one of the
// --allow-private-host entries: a private endpoint the operator named, to
// which plain http is acceptable (a webhook receiver on the same network).
func (c *Client) IsAllowedHost(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return false
	}
	port := defaultPort(u.Scheme, u.Port())
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		return c.allowedAddr(netip.AddrPortFrom(ip, port))
	}
	return c.allowedName(u.Hostname(), port)
}
