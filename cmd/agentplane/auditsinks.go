package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/siem"
)

// auditSinkFlags are serve's --audit-sink flags.
type auditSinkFlags struct {
	sinks     []string
	caFile    string
	secretRef string
	ocsf      string
}

func (f *auditSinkFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.sinks, "audit-sink", nil, "push every tenant's audit records, as OCSF events, to syslog+tcp://HOST:PORT, syslog+tls://HOST:PORT (RFC 5424, octet counting) or an https:// URL (signed NDJSON batches); repeatable; private addresses only as --allow-private-host allows")
	fs.StringVar(&f.caFile, "audit-sink-ca-file", "", "PEM CA bundle trusted, besides the system's roots, by syslog+tls and https audit sinks")
	fs.StringVar(&f.ocsf, "audit-sink-ocsf-version", siem.OCSFVersion, "OCSF schema version the audit sinks write: "+strings.Join(siem.OCSFVersions, " or ")+" (for a SIEM pinned to it; the chain under unmapped)")
	fs.StringVar(&f.secretRef, "audit-sink-secret-ref", "", "secret reference (env://, file://, vault://) of the whsec_ secret signing https audit sinks' batches (Standard Webhooks)")
}

// newAuditPusher builds the pusher of the --audit-sink flags, nil for
// none. Every sink is checked now: an unknown scheme, a refused address,
// an unreadable CA file or secret stops serve with the flag named.
func newAuditPusher(ctx context.Context, f auditSinkFlags, st siem.Store, parts *toolParts, reg prometheus.Registerer,
	owner string, logger *slog.Logger) (*siem.Pusher, error) {
	if len(f.sinks) == 0 {
		if f.caFile != "" || f.secretRef != "" {
			return nil, fmt.Errorf("--audit-sink-ca-file and --audit-sink-secret-ref configure --audit-sink: give it too")
		}
		return nil, nil
	}
	if !slices.Contains(siem.OCSFVersions, f.ocsf) {
		return nil, fmt.Errorf("--audit-sink-ocsf-version %q: write one of %s", f.ocsf, strings.Join(siem.OCSFVersions, ", "))
	}
	o := siem.SinkOptions{Dial: parts.client.DialContext, CheckHost: parts.client.CheckHost, CAFile: f.caFile}
	if f.secretRef != "" {
		// The operator's reference, outside the tenants' allow-list: a
		// resolver of its own allows it.
		policy, err := secrets.NewPolicy([]string{f.secretRef}, true)
		if err != nil {
			return nil, fmt.Errorf("--audit-sink-secret-ref: %w", err)
		}
		r, err := secrets.NewResolver(secrets.Options{Policy: policy, VaultHTTPClient: parts.client.HTTPClient()})
		if err != nil {
			return nil, fmt.Errorf("--audit-sink-secret-ref: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if o.Secret, err = r.Resolve(rctx, "", f.secretRef); err != nil {
			return nil, fmt.Errorf("--audit-sink-secret-ref: %w", err)
		}
		o.Secret = strings.TrimSpace(o.Secret)
	}
	p := &siem.Pusher{Store: st, Mapper: siem.Mapper{Version: version, OCSF: f.ocsf}, Metrics: siem.NewMetrics(reg), Owner: owner, Logger: logger}
	seen := map[string]bool{}
	for _, raw := range f.sinks {
		s, err := siem.ParseSink(ctx, raw, o)
		if err != nil {
			return nil, fmt.Errorf("--audit-sink %w", err)
		}
		if seen[s.Name()] {
			return nil, fmt.Errorf("--audit-sink %s is given twice", s.Name())
		}
		seen[s.Name()] = true
		p.Sinks = append(p.Sinks, s)
	}
	return p, nil
}
