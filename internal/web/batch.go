package web

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/replay"
)

// MaxBatchRows is the most changed replays a batch's report page lists;
// the API pages the rest.
const MaxBatchRows = 500

// BatchPage is what a replay batch's report page shows.
type BatchPage struct {
	Batch *replay.Batch
	// Changed are the batch's replays whose outcome changed, in batch
	// order, at most MaxBatchRows of them.
	Changed []*replay.Replay
	// Failed are the batch's replays that failed a check, in batch
	// order, at most MaxBatchRows of them (a batch with checks).
	Failed []*replay.Replay
	// Link returns the signed link of a replay's page.
	Link func(replayID string) string
	// TargetURL is the URL the batch's replays invoked, when its target is
	// an external agent version.
	TargetURL string
}

// RenderBatch writes the HTML report page of a batch; nothing is written
// on error.
func RenderBatch(w io.Writer, p BatchPage) error {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "batch.html", newBatchView(p)); err != nil {
		return err
	}
	_, err := buf.WriteTo(w)
	return err
}

// batchView is the batch template's data, everything formatted.
type batchView struct {
	*replay.Batch
	// TargetURL is the external agent the replays invoked ("" for a
	// defined version).
	TargetURL   string
	Stylesheet  string
	Created     string
	CreatedISO  string
	Finished    string
	FinishedISO string
	Running     bool
	Unchanged   int
	Percent     int
	// Froms and Tos head the matrix's rows (original outcomes) and
	// columns (replay outcomes); Matrix[i].Cells[j] counts Froms[i] → Tos[j].
	Froms, Tos []string
	Matrix     []matrixRow
	Rows       []batchRow
	// MoreChanged counts the changed replays beyond those listed.
	MoreChanged int
	// CheckRows are the batch's checks; FailedRows the replays that
	// failed one, first in the page.
	CheckRows  []checkRow
	FailedRows []failedRow
	// FailedCapped: there may be more failed replays than listed.
	FailedCapped bool
	Usage        *usageView
}

type checkRow struct {
	replay.CheckTotal
	Percent string
	// Gate is the minimum as a percentage, "" when the check is not gated.
	Gate  string
	Below bool
}

type failedRow struct {
	WorkflowID, Link         string
	OriginalOutcome, Outcome string
	Checks                   []replay.CheckResult
}

type usageView struct {
	OriginalTokens, ReplayTokens, TokenChange string
	OriginalCost, ReplayCost, CostChange      string
}

type matrixRow struct {
	From  string
	Cells []matrixCell
}

type matrixCell struct {
	From, To string
	Count    int
	Changed  bool
}

type batchRow struct {
	WorkflowID, Link string
	OriginalVersion  string
	// DiffLink opens the console's diff of OriginalVersion and the target.
	DiffLink                 string
	OriginalOutcome, Outcome string
	Error                    string
	Delta                    replay.Delta
}

func newBatchView(p BatchPage) batchView {
	b := p.Batch
	v := batchView{
		Batch:      b,
		TargetURL:  p.TargetURL,
		Stylesheet: stylesheet,
		Running:    b.Status == replay.BatchRunning,
		Unchanged:  b.Done - b.Changed,
	}
	if b.Total > 0 {
		v.Percent = b.Done * 100 / b.Total
	}
	v.Created, v.CreatedISO = formatTime(b.CreatedAt)
	if b.FinishedAt != nil {
		v.Finished, v.FinishedISO = formatTime(*b.FinishedAt)
	}
	count := map[[2]string]int{}
	for _, c := range b.OutcomeChanges {
		if !slices.Contains(v.Froms, c.From) {
			v.Froms = append(v.Froms, c.From)
		}
		if !slices.Contains(v.Tos, c.To) {
			v.Tos = append(v.Tos, c.To)
		}
		count[[2]string{c.From, c.To}] = c.Count
	}
	slices.Sort(v.Froms)
	slices.Sort(v.Tos)
	for _, from := range v.Froms {
		row := matrixRow{From: from}
		for _, to := range v.Tos {
			row.Cells = append(row.Cells, matrixCell{From: from, To: to, Count: count[[2]string{from, to}], Changed: from != to})
		}
		v.Matrix = append(v.Matrix, row)
	}
	for _, r := range p.Changed {
		v.Rows = append(v.Rows, batchRow{WorkflowID: r.WorkflowID, Link: p.Link(r.ID), OriginalVersion: r.OriginalVersion,
			DiffLink:        VersionDiffLink(r.OriginalVersion, b.Target),
			OriginalOutcome: r.OriginalOutcome, Outcome: r.ReplayOutcome, Error: r.ReplayError, Delta: r.Delta})
	}
	v.MoreChanged = max(0, b.Changed-len(v.Rows))
	for _, c := range b.Checks {
		row := checkRow{CheckTotal: c, Percent: percent(c.PassRate)}
		if c.Gate != nil {
			row.Gate, row.Below = percent(*c.Gate), c.PassRate < *c.Gate
		}
		v.CheckRows = append(v.CheckRows, row)
	}
	for _, r := range p.Failed {
		row := failedRow{WorkflowID: r.WorkflowID, Link: p.Link(r.ID), OriginalOutcome: r.OriginalOutcome, Outcome: r.ReplayOutcome}
		for _, c := range r.Checks {
			if c.Result() != replay.ResultPassed {
				row.Checks = append(row.Checks, c)
			}
		}
		v.FailedRows = append(v.FailedRows, row)
	}
	v.FailedCapped = len(v.FailedRows) >= MaxBatchRows
	// A live batch's replays asked their models now: their tokens and
	// cost beside the original runs' say what the change costs.
	if u := p.Batch.Usage; p.Batch.Live() {
		o, r := u.Original.InputTokens+u.Original.OutputTokens, u.Replay.InputTokens+u.Replay.OutputTokens
		v.Usage = &usageView{OriginalTokens: fmt.Sprint(o), ReplayTokens: fmt.Sprint(r), TokenChange: signed(float64(r-o), "%+.0f")}
		if oc, rc := u.Original.Cost, u.Replay.Cost; oc != nil && rc != nil && oc.Currency == rc.Currency {
			v.Usage.OriginalCost, v.Usage.ReplayCost = fmt.Sprintf("%.4f %s", oc.Amount, oc.Currency), fmt.Sprintf("%.4f %s", rc.Amount, rc.Currency)
			v.Usage.CostChange = signed(rc.Amount-oc.Amount, "%+.4f")
			if oc.Amount > 0 {
				v.Usage.CostChange += fmt.Sprintf(" (%+.0f%%)", (rc.Amount-oc.Amount)*100/oc.Amount)
			}
		}
	}
	return v
}

// percent shows a rate 0..1 as a percentage, with one decimal when needed.
func percent(rate float64) string {
	s := strconv.FormatFloat(rate*100, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}

func signed(v float64, format string) string {
	if v == 0 {
		return "no change"
	}
	return fmt.Sprintf(format, v)
}

// formatTime returns t for people and for a <time datetime>; "" when zero.
func formatTime(t time.Time) (human, iso string) {
	if t.IsZero() {
		return "", ""
	}
	t = t.UTC()
	return t.Format(time.DateTime + " UTC"), t.Format(time.RFC3339)
}
