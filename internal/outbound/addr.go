package outbound

import (
	"net/netip"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
)

// rangeClass names a class of addresses that outgoing requests refuse.
type rangeClass struct {
	prefix netip.Prefix
	class  string
}

// refused lists the IPv4 and IPv6 ranges refused unless the operator allows
// private networks. IPv6 addresses that carry an IPv4 address (embedded
// below) are judged by the address they carry.
var refused = []rangeClass{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	// Local-use NAT64 (RFC 8215) is a network's own translator, whose
	// prefix length (48 to 96 bits) decides where the IPv4 address sits:
	// it cannot be told from outside, so the whole range is refused.
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
}

// IPv6 ranges whose addresses carry an IPv4 address to a translator or a
// tunnel, which reaches that IPv4 address.
var (
	// ipv4Compatible is the deprecated IPv4-compatible form (RFC 4291
	// 2.5.5.1), ::a.b.c.d: its last 32 bits. :: and ::1 keep their own
	// classes.
	ipv4Compatible = netip.MustParsePrefix("::/96")
	// sixToFour is 6to4 (RFC 3056), 2002:AABB:CCDD::/48: bits 16 to 47.
	sixToFour = netip.MustParsePrefix("2002::/16")
	// nat64 is the well-known NAT64 prefix (RFC 6052): its last 32 bits.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// embedded returns the IPv4 address an IPv6 address carries, if it is of
// a translation range.
func embedded(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case ip == netip.IPv6Unspecified(), ip == netip.IPv6Loopback():
		return netip.Addr{}, false
	case ipv4Compatible.Contains(ip), nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// Class returns the class of a refused address ("loopback", "private",
// "link-local", …), or "" for a public address. An IPv4-mapped,
// IPv4-compatible, 6to4 or NAT64 address has the class of the IPv4
// address it carries.
func Class(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	if v4, ok := embedded(ip); ok {
		ip = v4
	}
	for _, r := range refused {
		if r.prefix.Contains(ip) {
			return r.class
		}
	}
	return ""
}

// AllowHint ends the detail of a refused address: how to allow it.
const AllowHint = "; the server's operator can allow such addresses with agentplane serve --allow-private-networks (on with --demo), or one host with --allow-private-host HOST[:PORT]"

// CheckAddr is the default address policy: it refuses loopback, private,
// link-local (cloud metadata included), shared, multicast, reserved and
// unspecified addresses with a problem.URLNotAllowed error.
func CheckAddr(ip netip.Addr) error {
	class := Class(ip)
	if class == "" {
		return nil
	}
	article := "a"
	if strings.IndexByte("aeiou", class[0]) >= 0 {
		article = "an"
	}
	return problem.New(problem.URLNotAllowed, "%s is %s %s address"+AllowHint, ip.WithZone("").Unmap(), article, class)
}

// ResolvesPrivate is the error of a host name that resolves to an address
// the policy refuses. It names the host and never the address: that an
// internal name resolves, and to what, is the network's own business.
func ResolvesPrivate(host string) error {
	return problem.New(problem.URLNotAllowed, "%s resolves to a private address"+AllowHint, host)
}

// metadataHosts are cloud metadata service names, refused by name before any
// lookup (their addresses are link-local and refused anyway).
var metadataHosts = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}

// isMetadataHost reports whether host names a cloud metadata service.
func isMetadataHost(host string) bool {
	return metadataHosts[strings.TrimSuffix(strings.ToLower(host), ".")]
}

// isLegacyIPv4 reports whether host is an IPv4 address in one of the forms
// inet_aton accepts besides dotted decimal: fewer than four parts
// ("2130706433", "127.1"), or parts in octal ("0177.0.0.1") or hexadecimal
// ("0x7f.0.0.1"). Some resolvers read such names as addresses and others
// look them up, so they are refused rather than guessed at.
func isLegacyIPv4(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false // canonical dotted decimal, or IPv6
	}
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		digits := p
		hex := false
		if len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X") {
			digits, hex = p[2:], true
		}
		if digits == "" {
			return false
		}
		for _, r := range digits {
			isDigit := r >= '0' && r <= '9'
			isHex := (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F')
			if !isDigit && !(hex && isHex) {
				return false
			}
		}
	}
	return true
}
