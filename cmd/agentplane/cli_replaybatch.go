package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentplane/agentplane/internal/client"
	"github.com/spf13/cobra"
)

// batchFlags are replay's --batch flags.
type batchFlags struct {
	batch, failOnChange     bool
	agent, version, outcome string
	since                   *timeFlag
	limit                   int
	// checks are the dataset, check, gate and JUnit flags (cli_checks.go).
	checks checkFlags
}

// replayBatch starts a batch, shows its progress until it ends and prints
// its outcome matrix.
func (c *cli) replayBatch(cmd *cobra.Command, target string, ids []string, bf batchFlags, wf whatIfFlags, key string) error {
	body := map[string]any{"target_agent_version": target}
	if err := wf.set(body, cmd.InOrStdin()); err != nil {
		return err
	}
	if err := bf.checks.apply(body); err != nil {
		return err
	}
	filtered := bf.agent != "" || bf.version != "" || bf.outcome != "" || bf.since.RFC3339() != "" || bf.limit > 0
	switch {
	case bf.checks.dataset != "":
		if len(ids) > 0 || filtered {
			return usagef("--dataset replays the dataset's workflows: give no workflow ids or filters with it")
		}
	case len(ids) > 0:
		body["workflow_ids"] = ids
	default:
		sel := map[string]any{}
		for k, v := range map[string]string{"agent": bf.agent, "agent_version": bf.version, "outcome": bf.outcome} {
			if v != "" {
				sel[k] = v
			}
		}
		if s := bf.since.RFC3339(); s != "" {
			sel["since"] = s
		}
		if bf.limit > 0 {
			sel["limit"] = bf.limit
		}
		body["workflows"] = sel
	}
	cl, err := c.client(cmd.Context())
	if err != nil {
		return err
	}
	resp, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodPost, Path: "/v1/replay-batches", Body: body, Header: idempotencyHeader(key)})
	if err != nil {
		return err
	}
	err = c.waitBatch(cmd, cl, resp.Body, bf.failOnChange)
	if bf.checks.junit != "" && junitWanted(err) {
		var b struct{ ID string }
		if jerr := json.Unmarshal(resp.Body, &b); jerr != nil {
			return fmt.Errorf("the server's answer is not JSON: %w", jerr)
		}
		if jerr := c.writeJUnit(cmd, cl, b.ID, bf.checks.junit); jerr != nil {
			return jerr
		}
	}
	return err
}

// waitBatch shows a batch's progress from its document doc until it ends,
// then its outcome matrix; the error says how it ended badly (not
// completed, or an outcome changed with failOnChange). Ctrl-C detaches.
func (c *cli) waitBatch(cmd *cobra.Command, cl *client.Client, doc []byte, failOnChange bool) error {
	var b struct {
		ID, Target           string
		Status, Verdict      string
		Total, Done, Changed int
	}
	decode := func(data []byte) error {
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("the server's answer is not JSON: %w", err)
		}
		b.ID, b.Target, b.Status, b.Verdict = field(doc, "id"), field(doc, "target_agent_version"), field(doc, "status"), field(doc, "verdict")
		b.Total, _ = strconv.Atoi(field(doc, "total"))
		b.Done, _ = strconv.Atoi(field(doc, "done"))
		b.Changed, _ = strconv.Atoi(field(doc, "changed"))
		return nil
	}
	if err := decode(doc); err != nil {
		return err
	}
	tty := isTerminal(c.stderr)
	if b.Status == "running" {
		fmt.Fprintf(c.stderr, "batch %s: replaying %d workflows against %s (Ctrl-C detaches; the batch goes on)\n", b.ID, b.Total, b.Target)
	}
	last := -1
	for b.Status == "running" {
		select {
		case <-cmd.Context().Done():
			fmt.Fprintf(c.stderr, "\ndetached; the batch goes on: agentplane batches wait %s\n", b.ID)
			return exitError{code: exitDetached, msg: "detached"}
		case <-time.After(300 * time.Millisecond):
		}
		resp, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodGet, Path: "/v1/replay-batches/" + b.ID})
		if err != nil {
			return err
		}
		doc = resp.Body
		if err := decode(doc); err != nil {
			return err
		}
		if b.Done != last {
			last = b.Done
			progress(c.stderr, tty, b.Done, b.Total, b.Changed)
		}
	}
	if tty && last >= 0 {
		fmt.Fprintln(c.stderr)
	}
	if err := c.show(doc, batchTable); err != nil {
		return err
	}
	switch {
	case b.Status != "completed":
		return exitError{code: exitOther, msg: "batch " + b.ID + " ended " + b.Status}
	case b.Verdict == "failed":
		return exitError{code: exitChanged, msg: "batch " + b.ID + " failed its checks against " + b.Target}
	case failOnChange && b.Changed > 0:
		return exitError{code: exitChanged, msg: fmt.Sprintf("%d of %d outcomes changed against %s", b.Changed, b.Total, b.Target)}
	}
	return nil
}

// progress shows a batch's progress: a bar redrawn in place on a terminal,
// a line per update otherwise.
func progress(w io.Writer, tty bool, done, total, changed int) {
	if !tty {
		fmt.Fprintf(w, "%d/%d replayed, %d changed\n", done, total, changed)
		return
	}
	const width = 30
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	fmt.Fprintf(w, "\r[%s%s] %d/%d replayed, %d changed", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, changed)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// batchTable shows a batch: counts, the outcome matrix and its status.
func batchTable(w io.Writer, doc map[string]any) error {
	fmt.Fprintf(w, "batch %s against %s: %s\n", field(doc, "id"), field(doc, "target_agent_version"), field(doc, "status"))
	fmt.Fprintf(w, "replayed %s of %s, outcome changed in %s\n", field(doc, "done"), field(doc, "total"), field(doc, "changed"))
	printUsage(w, doc)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM\tTO\tCOUNT\t")
	cells, _ := doc["outcome_changes"].([]any)
	for _, c := range cells {
		cell, _ := c.(map[string]any)
		mark := ""
		if field(cell, "from") != field(cell, "to") {
			mark = "changed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", field(cell, "from"), field(cell, "to"), field(cell, "count"), mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nsteps added %s, changed %s, removed %s; tool calls changed %s\n", field(doc, "delta_totals.steps_added"),
		field(doc, "delta_totals.steps_changed"), field(doc, "delta_totals.steps_removed"), field(doc, "delta_totals.tool_calls_changed"))
	fmt.Fprintf(w, "report: %s\n", field(doc, "viewer_url"))
	fmt.Fprintf(w, "changed replays: agentplane batches get %s --changed\n", field(doc, "id"))
	return checksTable(w, doc)
}
