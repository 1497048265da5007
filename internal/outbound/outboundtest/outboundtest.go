// Package outboundtest gives tests of the outbound address rules a
// resolver they control (outbound.Options.Resolver).
package outboundtest

import (
	"context"
	"net/netip"
)

// Names resolves the host names of its table, each to one address; any
// other name does not resolve.
type Names map[string]netip.Addr

// LookupNetIP implements outbound.Resolver.
func (n Names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &noHost{host}
}

type noHost struct{ host string }

func (e *noHost) Error() string { return "no such host " + e.host }
