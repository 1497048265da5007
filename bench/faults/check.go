package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// results are the checks' findings.
type results struct {
	acked      int
	lost       []string // acknowledged workflows missing or not finished
	keys       int      // distinct writes the tool service received
	resent     int      // re-sends of a write with its Idempotency-Key
	unkeyed    int      // writes without a key: unexplained
	chainOK    bool
	chainErr   string
	checked    int64    // audit records the verification read
	missingEnd []string // acknowledged workflows without their workflow.finish record
}

func (r results) ok() bool {
	return len(r.lost) == 0 && r.unkeyed == 0 && r.chainOK && len(r.missingEnd) == 0
}

// check waits up to settle for every acknowledged workflow to finish
// (those of a killed replica are resumed elsewhere), then runs the checks.
func check(ctx context.Context, c *cluster, l *load, tools *toolService, settle time.Duration) results {
	var r results
	ids := l.acked()
	slices.Sort(ids)
	r.acked = len(ids)
	deadline := time.Now().Add(settle)
	pending := ids
	for len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		var still []string
		for _, id := range pending {
			a := c.send(ctx, "check", "GET", "/v1/workflows/"+id, nil, "")
			var v struct {
				Status string `json:"status"`
			}
			if a.status != http.StatusOK || json.Unmarshal(a.body, &v) != nil || v.Status == "running" || v.Status == "" {
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) > 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	r.lost = pending

	r.keys, r.resent, r.unkeyed = tools.writes()

	a := c.send(ctx, "check", "GET", "/v1/audit/verify", nil, "")
	var v struct {
		OK             bool   `json:"ok"`
		RecordsChecked int64  `json:"records_checked"`
		FirstBadSeq    *int64 `json:"first_bad_seq"`
	}
	switch {
	case a.status != http.StatusOK || json.Unmarshal(a.body, &v) != nil:
		r.chainErr = fmt.Sprintf("verify answered %d %.200s %v", a.status, a.body, a.err)
	case !v.OK:
		r.chainErr = fmt.Sprintf("first bad seq %v", v.FirstBadSeq)
	default:
		r.chainOK = true
	}
	r.checked = v.RecordsChecked

	for _, id := range ids {
		q := url.Values{"workflow_id": {id}, "action": {"workflow.finish"}, "limit": {"5"}}
		a := c.send(ctx, "check", "GET", "/v1/audit/query?"+q.Encode(), nil, "")
		var recs struct {
			Records []json.RawMessage `json:"records"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &recs) != nil || len(recs.Records) != 1 {
			r.missingEnd = append(r.missingEnd, id)
		}
	}
	return r
}

// report prints the requests, the faults and the checks.
func report(w io.Writer, o options, l *load, fired []fault, r results) {
	fmt.Fprintf(w, "%d replicas, %d workers, %v of load\n\n", o.replicas, o.workers, o.duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\trequests\tby final status\tattempts answered\tp50 ms\tp99 ms\t")
	l.mu.Lock()
	for _, k := range kinds {
		st := l.statuses[k.name]
		total := 0
		var parts []string
		for s, n := range st {
			total += n
			parts = append(parts, fmt.Sprintf("%s: %d", s, n))
		}
		sort.Strings(parts)
		lat := slices.Clone(l.lat[k.name])
		slices.Sort(lat)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.1f\t%.1f\t\n", k.name, total, strings.Join(parts, ", "), len(lat),
			ms(pct(lat, 50)), ms(pct(lat, 99)))
	}
	firstErr := map[string]string{}
	for k, e := range l.firstErr {
		firstErr[k] = e
	}
	l.mu.Unlock()
	tw.Flush()

	fmt.Fprintln(w, "\nfaults:")
	for _, f := range fired {
		fmt.Fprintf(w, "  %6v  %s\n", f.at, f.what)
	}
	if len(firstErr) > 0 {
		fmt.Fprintln(w, "\nfirst failure of each kind (answered after every re-send, or not at all):")
		for _, k := range kinds {
			if e := firstErr[k.name]; e != "" {
				fmt.Fprintf(w, "  %s: %s\n", k.name, e)
			}
		}
	}

	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAILED"
	}
	fmt.Fprintln(w, "\nchecks:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  acknowledged workflows lost or unfinished\t%d of %d\t%s\n", len(r.lost), r.acked, verdict(len(r.lost) == 0))
	fmt.Fprintf(tw, "  writes at the tool service\t%d, %d re-sent with their Idempotency-Key, %d without a key\t%s\n",
		r.keys, r.resent, r.unkeyed, verdict(r.unkeyed == 0))
	chain := fmt.Sprintf("%d records verified", r.checked)
	if !r.chainOK {
		chain = r.chainErr
	}
	fmt.Fprintf(tw, "  audit chain of tenant %s\t%s\t%s\n", tenant, chain, verdict(r.chainOK))
	fmt.Fprintf(tw, "  acknowledged workflows without their workflow.finish record\t%d\t%s\n", len(r.missingEnd), verdict(len(r.missingEnd) == 0))
	tw.Flush()
	for _, id := range first(r.lost, 5) {
		fmt.Fprintf(w, "  lost: %s\n", id)
	}
	for _, id := range first(r.missingEnd, 5) {
		fmt.Fprintf(w, "  no workflow.finish record: %s\n", id)
	}
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q/100*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func first(xs []string, n int) []string { return xs[:min(n, len(xs))] }
