package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The defaults of SPEC §5 and §2.
var (
	// DefaultTenantLimit is every tenant's quota unless overridden: 600
	// requests a minute, burst 600.
	DefaultTenantLimit = Limit{Rate: 600, Burst: 600, Period: time.Minute}
	// DefaultIPLimit is the quota of unauthenticated traffic per client IP:
	// 120 requests a minute, burst 120.
	DefaultIPLimit = Limit{Rate: 120, Burst: 120, Period: time.Minute}
)

// Policy says which Limit applies to a request.
type Policy struct {
	// Default is the quota of a tenant without an override.
	Default Limit
	// Tenants holds per-tenant overrides.
	Tenants map[string]Limit
	// IP is the quota of unauthenticated traffic per client IP.
	IP Limit
}

// DefaultPolicy returns the SPEC defaults with no overrides.
func DefaultPolicy() Policy {
	return Policy{Default: DefaultTenantLimit, IP: DefaultIPLimit}
}

// For returns tenant's Limit: its override, or the default.
func (p Policy) For(tenant string) Limit {
	if l, ok := p.Tenants[tenant]; ok {
		return l.normalize()
	}
	return p.Default.normalize()
}

// ForIP returns the Limit of unauthenticated traffic from one client IP.
func (p Policy) ForIP() Limit {
	return p.IP.normalize()
}

// TenantKey is the Limiter key of a tenant's quota.
func TenantKey(tenant string) string { return "tenant:" + tenant }

// IPKey is the Limiter key of an unauthenticated client IP's quota.
func IPKey(ip string) string { return "ip:" + ip }

// ParseOverrides parses --rate-limit-tenant values of the form
// tenant=rate[:burst], rate and burst counted per minute; burst defaults to
// rate. A tenant named twice is an error.
func ParseOverrides(specs []string) (map[string]Limit, error) {
	out := make(map[string]Limit, len(specs))
	for _, spec := range specs {
		tenant, l, err := parseOverride(spec)
		if err != nil {
			return nil, err
		}
		if _, dup := out[tenant]; dup {
			return nil, fmt.Errorf("rate limit override %q: tenant %q given twice", spec, tenant)
		}
		out[tenant] = l
	}
	return out, nil
}

// parseOverride parses one tenant=rate[:burst].
func parseOverride(spec string) (string, Limit, error) {
	tenant, value, ok := strings.Cut(spec, "=")
	tenant = strings.TrimSpace(tenant)
	if !ok || tenant == "" {
		return "", Limit{}, fmt.Errorf("rate limit override %q: want tenant=rate[:burst]", spec)
	}
	rateText, burstText, hasBurst := strings.Cut(value, ":")
	rate, err := positive(rateText)
	if err != nil {
		return "", Limit{}, fmt.Errorf("rate limit override %q: rate: %w", spec, err)
	}
	burst := rate
	if hasBurst {
		if burst, err = positive(burstText); err != nil {
			return "", Limit{}, fmt.Errorf("rate limit override %q: burst: %w", spec, err)
		}
	}
	return tenant, Limit{Rate: rate, Burst: burst, Period: time.Minute}, nil
}

// positive parses a positive decimal integer.
func positive(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	if n <= 0 {
		return 0, fmt.Errorf("%d is not positive", n)
	}
	return n, nil
}
