package web

import (
	"bytes"
	"io"
	"slices"
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
	// Link returns the signed link of a replay's page.
	Link func(replayID string) string
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
	WorkflowID, Link         string
	OriginalVersion          string
	OriginalOutcome, Outcome string
	Error                    string
	Delta                    replay.Delta
}

func newBatchView(p BatchPage) batchView {
	b := p.Batch
	v := batchView{
		Batch:      b,
		Stylesheet: AssetsPath + "viewer.css?v=" + assetVersion,
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
			OriginalOutcome: r.OriginalOutcome, Outcome: r.ReplayOutcome, Error: r.ReplayError, Delta: r.Delta})
	}
	v.MoreChanged = max(0, b.Changed-len(v.Rows))
	return v
}

// formatTime returns t for people and for a <time datetime>; "" when zero.
func formatTime(t time.Time) (human, iso string) {
	if t.IsZero() {
		return "", ""
	}
	t = t.UTC()
	return t.Format(time.DateTime + " UTC"), t.Format(time.RFC3339)
}
