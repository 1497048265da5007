package console_test

import (
	"encoding/xml"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/store/sqlite"
	"github.com/agentplane/agentplane/internal/workflow"
)

var day0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seedUsage records completions in a real store over three days: triage
// on gpt-small every day, billing on gpt-large on the second, and usage of
// another tenant that must not show.
func seedUsage(t *testing.T) *sqlite.DB {
	t.Helper()
	db := sqlite.NewTestDB(t)
	rec := func(tenant, agentName, model string, d int, in, out int64, cost float64, cur string) {
		err := db.RecordUsage(t.Context(), workflow.UsageRecord{Tenant: tenant, Agent: agentName, Model: model,
			InputTokens: in, OutputTokens: out, Cost: cost, Currency: cur, At: day0.AddDate(0, 0, d)})
		if err != nil {
			t.Fatal(err)
		}
	}
	for d := range 3 {
		rec("acme", "triage", "gpt-small", d, 1000, 200, 0.01, "EUR")
		rec("acme", "triage", "gpt-small", d, 500, 100, 0.005, "EUR")
	}
	rec("acme", "billing", "gpt-large", 1, 8000, 2000, 0.5, "EUR")
	rec("acme", "billing", "local", 1, 300, 0, 0, "")
	rec("globex", "triage", "gpt-small", 1, 99999, 0, 9, "EUR")
	return db
}

func TestUsageChartsFromTheRollup(t *testing.T) {
	db := seedUsage(t)
	u, err := console.LoadUsage(t.Context(), db, "acme", workflow.GroupByAgent, day0.AddDate(0, 0, -1), day0.AddDate(0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"2026-02-28", "2026-03-01", "2026-03-02", "2026-03-03"}, u.Days); diff != "" {
		t.Errorf("days (-want +got):\n%s", diff)
	}
	charts := console.UsageCharts(u)
	if len(charts) != 2 || charts[0].Unit != "tokens" || charts[1].Unit != "EUR" {
		t.Fatalf("charts %+v, want tokens and EUR", charts)
	}
	tokens := charts[0]
	type series struct {
		Key    string
		Values []float64
	}
	var got []series
	for _, s := range tokens.Series {
		got = append(got, series{s.Key, s.Values})
	}
	want := []series{{"billing", []float64{0, 0, 10300, 0}}, {"triage", []float64{0, 1800, 1800, 1800}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("token series, largest first (-want +got):\n%s", diff)
	}
	if len(tokens.Bars) != 4 {
		t.Fatalf("%d bars, want one per non-zero value (4)", len(tokens.Bars))
	}
	// The axis tops at 20k (the next round step above 12,100); a bar's
	// height is its share of the plot, stacked on the one below it.
	plot := float64(tokens.PlotBottom - 12)
	for _, b := range tokens.Bars {
		if b.Label == "2026-03-02, billing: 10.3k tokens" {
			if want := 10300 / 20000.0 * plot; b.H < want-0.01 || b.H > want+0.01 || b.Y+b.H != float64(tokens.PlotBottom) {
				t.Errorf("billing's bar %+v, want height %.2f on the axis", b, want)
			}
		}
	}
	if got := tokens.YTicks[len(tokens.YTicks)-1].Label; got != "20k" {
		t.Errorf("top tick %q, want 20k", got)
	}
	wantDesc := "From 2026-02-28 to 2026-03-03, 15.7k tokens in all; billing the most (10.3k tokens); the busiest day 2026-03-02 (12.1k tokens). The table below has every value."
	if tokens.Desc != wantDesc {
		t.Errorf("desc:\n%s\nwant:\n%s", tokens.Desc, wantDesc)
	}
	cost := charts[1]
	if cost.Rows[2].Total != "0.515" || cost.Rows[1].Cells[1] != "0.015" || cost.Rows[0].Total != "0" {
		t.Errorf("cost rows %+v", cost.Rows)
	}

	byModel, err := console.LoadUsage(t.Context(), db, "acme", workflow.GroupByModel, day0, day0.AddDate(0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range console.UsageCharts(byModel)[0].Series {
		keys = append(keys, s.Key)
	}
	if diff := cmp.Diff([]string{"gpt-large", "gpt-small", "local"}, keys); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestUsageChartHTML(t *testing.T) {
	u, err := console.LoadUsage(t.Context(), seedUsage(t), "acme", workflow.GroupByAgent, day0, day0.AddDate(0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	html, err := console.UsageCharts(u)[0].HTML()
	if err != nil {
		t.Fatal(err)
	}
	s := string(html)
	// Well-formed: every element closed, every attribute quoted.
	dec := xml.NewDecoder(strings.NewReader(s))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("the chart is not well-formed: %v\n%s", err, s)
			}
			break
		}
	}
	for _, want := range []string{
		`role="img" aria-labelledby="usage-tokens-title usage-tokens-desc"`,
		`<title id="usage-tokens-title">Tokens per day by agent</title>`,
		`<desc id="usage-tokens-desc">From 2026-03-01 to 2026-03-03`,
		`<th scope="col">billing</th><th scope="col">triage</th><th scope="col">Total</th>`,
		`<tr><th scope="row">2026-03-02</th><td>10.3k</td><td>1800</td><td>12.1k</td></tr>`,
		`<title>2026-03-02, billing: 10.3k tokens</title>`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("chart lacks %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, "style=") || strings.Contains(s, "<script") {
		t.Errorf("the chart has inline style or script, which the console's CSP refuses:\n%s", s)
	}
}

// TestUsageChartFoldsOther checks a chart of more keys than colours: the
// smallest are summed as "other", in the last colour.
func TestUsageChartFoldsOther(t *testing.T) {
	u := &console.UsageDays{By: "model", Days: []string{"2026-03-01"}}
	var groups []workflow.UsageGroup
	for i := range 9 {
		groups = append(groups, workflow.UsageGroup{Key: fmt.Sprintf("m%d", i), InputTokens: int64(100 * (i + 1))})
	}
	u.Groups = [][]workflow.UsageGroup{groups}
	c := console.UsageCharts(u)[0]
	if len(c.Series) != 7 || c.Series[0].Key != "m8" || c.Series[6].Key != "other" || c.Series[6].Total != 100+200+300 {
		t.Errorf("series %+v", c.Series)
	}
	if c.Series[6].Color != "#555555" || c.Series[0].Color != "#0072B2" {
		t.Errorf("colours %s, %s", c.Series[0].Color, c.Series[6].Color)
	}
}

func TestLoadUsageBounds(t *testing.T) {
	db := seedUsage(t)
	if _, err := console.LoadUsage(t.Context(), db, "acme", workflow.GroupByAgent, day0, day0.AddDate(0, 0, -1)); err == nil {
		t.Error("until before since: no error")
	}
	if _, err := console.LoadUsage(t.Context(), db, "acme", workflow.GroupByAgent, day0, day0.AddDate(0, 0, console.MaxUsageDays)); err == nil {
		t.Error("more than MaxUsageDays: no error")
	}
	u, err := console.LoadUsage(t.Context(), db, "acme", workflow.GroupByAgent, day0.AddDate(0, 1, 0), day0.AddDate(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if c := console.UsageCharts(u); len(c) != 1 || len(c[0].Bars) != 0 || c[0].Desc != "No usage from 2026-04-01 to 2026-04-01." {
		t.Errorf("an empty day: %+v", c)
	}
}
