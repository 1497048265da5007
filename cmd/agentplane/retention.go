package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/internal/retention"
)

// retentionFlags are how long serve keeps finished workflows and audit
// records (docs/retention.md).
type retentionFlags struct {
	workflows string
	tenants   []string
	audit     string
	every     time.Duration
	share     float64
}

func (f *retentionFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.workflows, "retention", "0", "how long finished workflows are kept, with their steps, completions, replays and keys: days (90d) or a duration (720h), at least 1h; 0 keeps them forever")
	fs.StringSliceVar(&f.tenants, "tenant-retention", nil, "a tenant's own --retention, tenant=retention (acme=30d; acme=0 keeps acme's forever), repeatable or comma-separated")
	fs.DurationVar(&f.every, "retention-interval", retention.DefaultEvery, "how often a replica tries to take the retention lease and sweep")
	fs.Float64Var(&f.share, "retention-share", retention.DefaultShare, "the part of the store's writing time the retention sweep takes while requests are writing, over 0 and at most 1; it sweeps at full speed while nothing else writes")
	fs.StringVar(&f.audit, "audit-retention", "0", "how long audit records are kept: days (365d) or a duration, at least 1h; older ones are removed behind an audit.checkpoint record that keeps the chain verifiable; 0 keeps them forever")
}

// policy parses the flags; each error names its flag.
func (f *retentionFlags) policy() (retention.Policy, error) {
	var p retention.Policy
	var err error
	if f.every < time.Second {
		return p, fmt.Errorf("--retention-interval must be at least 1s, not %s", f.every)
	}
	if !(f.share > 0 && f.share <= 1) {
		return p, fmt.Errorf("--retention-share must be over 0 and at most 1 (0.05 is a twentieth of the writing time), not %v", f.share)
	}
	if p.Default, err = retention.ParseDuration(f.workflows); err != nil {
		return p, fmt.Errorf("--retention: %w", err)
	}
	if p.Audit, err = retention.ParseDuration(f.audit); err != nil {
		return p, fmt.Errorf("--audit-retention: %w", err)
	}
	for _, s := range f.tenants {
		tenant, d, err := retention.ParseTenant(s)
		if err != nil {
			return p, fmt.Errorf("--tenant-retention: %w", err)
		}
		if _, dup := p.Tenants[tenant]; dup {
			return p, fmt.Errorf("--tenant-retention: tenant %q is given twice", tenant)
		}
		if p.Tenants == nil {
			p.Tenants = map[string]time.Duration{}
		}
		p.Tenants[tenant] = d
	}
	return p, nil
}
