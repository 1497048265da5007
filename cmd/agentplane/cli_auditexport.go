package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/client"
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
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the tenant's audit records as OCSF events, one JSON per line, oldest first",
		Long: `Writes the records after --cursor (from the oldest kept, without it) as OCSF 1.4.0
events, one per line, to stdout: the lines of GET /v1/audit/export, page after page, without
their next_cursor lines. When it stops it prints the cursor to resume from on stderr. With
--follow it keeps polling for new records until interrupted.`,
		Args: args(0, "no arguments"),
		Example: `  agentplane audit export > audit.ndjson
  agentplane audit export --cursor ZTQy --follow | vector --config siem.toml`,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
					Path: "/v1/audit/export" + query("format", "ocsf", "cursor", cursor, "limit", fmt.Sprint(limit))})
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
	return cmd
}
