package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/client"
	"github.com/agentplane/agentplane/internal/siem"
)

// auditExportCommand is `agentplane audit export`: the tenant's chain as
// OCSF NDJSON on stdout, page after page, and with --follow, what comes
// after as it comes.
func (c *cli) auditExportCommand() *cobra.Command {
	var (
		cursor   string
		limit    int
		follow   bool
		interval time.Duration
		ocsf     string
		verify   string
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the tenant's audit records as OCSF events, one JSON per line, oldest first",
		Long: `Writes the records after --cursor (from the oldest kept, without it) as OCSF 1.9.0
events (--ocsf-version 1.4.0 for a SIEM pinned to it), one per line, to stdout: the lines of
GET /v1/audit/export, page after page, without their next_cursor lines. When it stops it
prints the cursor to resume from on stderr. With --follow it keeps polling for new records
until interrupted.

With --verify FILE (- for stdin) it reads an export instead, from any source, and recomputes
its hash chains from it alone: each event's record (raw_data) must hash to the hash the
event carries and follow the record before it. It needs no server and exits 1 at the first
event that does not verify.`,
		Args: args(0, "no arguments"),
		Example: `  agentplane audit export > audit.ndjson
  agentplane audit export --verify audit.ndjson
  agentplane audit export --cursor ZTQy --follow | vector --config siem.toml`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if verify != "" {
				return c.verifyExport(verify, cmd.InOrStdin())
			}
			if limit < 1 || limit > 5000 {
				return fmt.Errorf("--limit must be from 1 to 5000, not %d", limit)
			}
			if interval < 100*time.Millisecond {
				return fmt.Errorf("--interval must be at least 100ms, not %s", interval)
			}
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			defer func() { fmt.Fprintf(c.stderr, "next cursor: %s\n", cursor) }()
			for {
				resp, err := cl.Do(ctx, client.Request{Method: http.MethodGet,
					Path: "/v1/audit/export" + query("format", "ocsf", "ocsf_version", ocsf, "cursor", cursor, "limit", fmt.Sprint(limit))})
				if err != nil {
					if ctx.Err() != nil && follow {
						return nil
					}
					return err
				}
				body := bytes.TrimRight(resp.Body, "\n")
				last := bytes.LastIndexByte(body, '\n')
				var end struct {
					NextCursor string `json:"next_cursor"`
					More       bool   `json:"more"`
				}
				if err := json.Unmarshal(body[last+1:], &end); err != nil || end.NextCursor == "" {
					return fmt.Errorf("the export's last line is not its next_cursor: %.200s", body[last+1:])
				}
				if last >= 0 {
					if _, err := c.stdout.Write(body[:last+1]); err != nil {
						return err
					}
				}
				cursor = end.NextCursor
				if end.More {
					continue
				}
				if !follow {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&cursor, "cursor", "", "resume after this cursor (printed by an earlier export, or the next_cursor of GET /v1/audit/export)")
	f.IntVar(&limit, "limit", 1000, "records per request, at most 5000")
	f.BoolVar(&follow, "follow", false, "keep polling for new records until interrupted")
	f.DurationVar(&interval, "interval", 5*time.Second, "with --follow, the wait between polls once caught up")
	f.StringVar(&ocsf, "ocsf-version", siem.OCSFVersion, "OCSF schema version of the events: "+strings.Join(siem.OCSFVersions, " or "))
	f.StringVar(&verify, "verify", "", "recompute the hash chains of this export file (- for stdin) instead of exporting")
	return cmd
}

// verifyExport checks the export in path (stdin for -) and reports each
// chain it holds, or the first event that does not verify.
func (c *cli) verifyExport(path string, stdin io.Reader) error {
	in := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	rep, err := siem.VerifyExport(in)
	if err != nil {
		return err
	}
	body, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if err := c.show(body, func(w io.Writer, _ map[string]any) error {
		for _, tenant := range slices.Sorted(maps.Keys(rep.Chains)) {
			ch := rep.Chains[tenant]
			fmt.Fprintf(w, "%s: seq %d to %d, anchored at seq %d (prev hash %s), last hash %s\n",
				tenant, ch.FirstSeq, ch.LastSeq, ch.AnchoredAtSeq, ch.AnchorHash, ch.LastHash)
		}
		if rep.OK {
			fmt.Fprintf(w, "ok: %d records, every chain intact\n", rep.RecordsChecked)
		} else {
			b := rep.FirstBad
			fmt.Fprintf(w, "BROKEN at line %d (tenant %q, seq %d): %s\n", b.Line, b.Tenant, b.Seq, b.Reason)
		}
		return nil
	}); err != nil {
		return err
	}
	if !rep.OK {
		return exitError{code: exitOther, msg: "the export does not verify"}
	}
	return nil
}
