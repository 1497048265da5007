package console

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/workflow"
)

// UsageSource is the store's usage rollup (GET /v1/usage reads the same).
type UsageSource interface {
	Usage(ctx context.Context, tenant string, q workflow.UsageQuery) ([]workflow.UsageGroup, error)
}

// MaxUsageDays bounds the days a usage chart covers: one rollup query a day.
const MaxUsageDays = 92

// UsageDays is a tenant's usage per day, each day's grouped by agent or
// model (By), oldest day first.
type UsageDays struct {
	By   string
	Days []string
	// Groups holds each day's groups, as the rollup orders them (by key).
	Groups [][]workflow.UsageGroup
}

// LoadUsage reads the tenant's usage of each day from since's day to
// until's, grouped by by (workflow.GroupByAgent or GroupByModel).
func LoadUsage(ctx context.Context, src UsageSource, tenant, by string, since, until time.Time) (*UsageDays, error) {
	from, to := midnight(since), midnight(until)
	n := int(to.Sub(from).Hours()/24) + 1
	if n < 1 || n > MaxUsageDays {
		return nil, fmt.Errorf("a usage chart covers 1 to %d days, not %d", MaxUsageDays, n)
	}
	u := &UsageDays{By: by}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		groups, err := src.Usage(ctx, tenant, workflow.UsageQuery{Since: d, Until: d, GroupBy: by})
		if err != nil {
			return nil, fmt.Errorf("usage of %s: %w", workflow.Day(d), err)
		}
		u.Days = append(u.Days, workflow.Day(d))
		u.Groups = append(u.Groups, groups)
	}
	return u, nil
}

func midnight(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// palette are the series' colours (Okabe and Ito's, told apart with the
// common colour-vision deficiencies; each at least 3:1 against white). A
// chart shows the largest len(palette)-1 series and sums the rest as
// "other", drawn in the last colour.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#8A6100", "#56B4E9", "#555555"}

// UsageChart is one measure (tokens, or the cost in one currency) per day,
// stacked by agent or model: an SVG with its title and description for
// assistive technology, and the same numbers as a table.
type UsageChart struct {
	ID, Title, Desc string
	Unit            string
	Days            []string
	Series          []ChartSeries
	// Totals are the days' sums.
	Totals []float64
	// Rows are the table's rows: a day, each series' cell, the total.
	Rows []ChartRow
	// The drawing, in the SVG's user units.
	Width, Height int
	PlotLeft      int
	PlotBottom    int
	Bars          []ChartBar
	YTicks        []ChartTick
	XTicks        []ChartTick
}

// ChartSeries is one agent's or model's values per day.
type ChartSeries struct {
	Key, Color string
	Values     []float64
	Total      float64
	// TotalCell is Total as the legend shows it.
	TotalCell string
}

// ChartRow is one day of the table.
type ChartRow struct {
	Day   string
	Cells []string
	Total string
}

// ChartBar is one rectangle: a series' value on a day.
type ChartBar struct {
	X, Y, W, H float64
	Color      string
	// Label is read out and shown on hover.
	Label string
}

// ChartTick is an axis label at a position.
type ChartTick struct {
	Pos   float64
	Label string
}

// UsageCharts draws the tokens chart and a cost chart per currency.
func UsageCharts(u *UsageDays) []UsageChart {
	noun := u.By
	tokens := measure(u, func(g workflow.UsageGroup) map[string]float64 {
		return map[string]float64{"": float64(g.InputTokens + g.OutputTokens)}
	})
	charts := []UsageChart{draw("usage-tokens", "Tokens per day by "+noun, "tokens", u.Days, tokens[""])}
	costs := measure(u, func(g workflow.UsageGroup) map[string]float64 {
		m := map[string]float64{}
		for _, c := range g.Cost {
			m[c.Currency] += c.Amount
		}
		return m
	})
	for _, cur := range slices.Sorted(maps.Keys(costs)) {
		charts = append(charts, draw("usage-cost-"+cur, "Cost in "+cur+" per day by "+noun, cur, u.Days, costs[cur]))
	}
	return charts
}

// measure gives, per unit (a currency, or "" for tokens), each key's
// value per day.
func measure(u *UsageDays, of func(workflow.UsageGroup) map[string]float64) map[string]map[string][]float64 {
	out := map[string]map[string][]float64{}
	for i, groups := range u.Groups {
		for _, g := range groups {
			for unit, v := range of(g) {
				if out[unit] == nil {
					out[unit] = map[string][]float64{}
				}
				if out[unit][g.Key] == nil {
					out[unit][g.Key] = make([]float64, len(u.Days))
				}
				out[unit][g.Key][i] += v
			}
		}
	}
	return out
}

// Geometry of a chart, in user units (the SVG scales to its box).
const (
	chartWidth  = 720
	chartHeight = 260
	plotLeft    = 64
	plotRight   = 12
	plotTop     = 12
	plotBottom  = 36
)

// draw lays out one chart: the largest series first (at the bottom of
// each stack), the smallest beyond the palette summed as "other".
func draw(id, title, unit string, days []string, values map[string][]float64) UsageChart {
	c := UsageChart{ID: id, Title: title, Unit: unit, Days: days, Width: chartWidth, Height: chartHeight,
		PlotLeft: plotLeft, PlotBottom: chartHeight - plotBottom, Totals: make([]float64, len(days))}
	for key, vs := range values {
		s := ChartSeries{Key: key, Values: vs}
		for _, v := range vs {
			s.Total += v
		}
		c.Series = append(c.Series, s)
	}
	slices.SortFunc(c.Series, func(a, b ChartSeries) int {
		if a.Total != b.Total {
			if a.Total > b.Total {
				return -1
			}
			return 1
		}
		if a.Key < b.Key {
			return -1
		}
		return 1
	})
	if len(c.Series) > len(palette) {
		other := ChartSeries{Key: "other", Values: make([]float64, len(days))}
		for _, s := range c.Series[len(palette)-1:] {
			for i, v := range s.Values {
				other.Values[i] += v
			}
			other.Total += s.Total
		}
		c.Series = append(c.Series[:len(palette)-1:len(palette)-1], other)
	}
	for i := range c.Series {
		c.Series[i].Color = palette[i]
		c.Series[i].TotalCell = FormatAmount(c.Series[i].Total, unit)
		for d, v := range c.Series[i].Values {
			c.Totals[d] += v
		}
	}
	top := niceCeiling(slices.Max(append([]float64{0}, c.Totals...)))
	plotW := float64(chartWidth - plotLeft - plotRight)
	plotH := float64(chartHeight - plotTop - plotBottom)
	slot := plotW / float64(max(len(days), 1))
	barW := math.Max(1, slot*0.7)
	for d, day := range days {
		x := float64(plotLeft) + slot*float64(d) + (slot-barW)/2
		y := float64(chartHeight - plotBottom)
		for _, s := range c.Series {
			v := s.Values[d]
			if v <= 0 {
				continue
			}
			h := v / top * plotH
			y -= h
			c.Bars = append(c.Bars, ChartBar{X: round2(x), Y: round2(y), W: round2(barW), H: round2(h), Color: s.Color,
				Label: fmt.Sprintf("%s, %s: %s %s", day, s.Key, FormatAmount(v, unit), unit)})
		}
	}
	for i := range 5 {
		v := top * float64(i) / 4
		c.YTicks = append(c.YTicks, ChartTick{Pos: round2(float64(chartHeight-plotBottom) - v/top*plotH), Label: FormatAmount(v, unit)})
	}
	step := max(1, (len(days)+6)/7) // at most about seven day labels
	for d := 0; d < len(days); d += step {
		c.XTicks = append(c.XTicks, ChartTick{Pos: round2(float64(plotLeft) + slot*(float64(d)+0.5)), Label: days[d][5:]})
	}
	for d, day := range days {
		row := ChartRow{Day: day, Total: FormatAmount(c.Totals[d], unit)}
		for _, s := range c.Series {
			row.Cells = append(row.Cells, FormatAmount(s.Values[d], unit))
		}
		c.Rows = append(c.Rows, row)
	}
	c.Desc = describe(c)
	return c
}

// describe is the chart's text equivalent in a sentence or two.
func describe(c UsageChart) string {
	if len(c.Series) == 0 {
		return fmt.Sprintf("No usage from %s to %s.", c.Days[0], c.Days[len(c.Days)-1])
	}
	var total float64
	busiest := 0
	for d, t := range c.Totals {
		total += t
		if t > c.Totals[busiest] {
			busiest = d
		}
	}
	return fmt.Sprintf("From %s to %s, %s %s in all; %s the most (%s %s); the busiest day %s (%s %s). The table below has every value.",
		c.Days[0], c.Days[len(c.Days)-1], FormatAmount(total, c.Unit), c.Unit, c.Series[0].Key, FormatAmount(c.Series[0].Total, c.Unit), c.Unit,
		c.Days[busiest], FormatAmount(c.Totals[busiest], c.Unit), c.Unit)
}

// niceCeiling is the smallest 1, 2, 2.5 or 5 × 10^k at or above v (1 for
// nothing), so the axis reads in round steps of a quarter.
func niceCeiling(v float64) float64 {
	if v <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= v*(1-1e-12) {
			return m * mag
		}
	}
	return 10 * mag
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// FormatAmount writes tokens as whole numbers (12.5k, 3.2M) and money
// with the decimals its size needs.
func FormatAmount(v float64, unit string) string {
	if unit == "tokens" {
		switch {
		case v >= 1e6:
			return strconv.FormatFloat(math.Round(v/1e5)/10, 'f', -1, 64) + "M"
		case v >= 1e4:
			return strconv.FormatFloat(math.Round(v/100)/10, 'f', -1, 64) + "k"
		}
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strings.TrimRight(strconv.FormatFloat(v, 'f', 4, 64), "0") // 0.015, not 0.0150
}

//go:embed templates/_usagechart.html
var usageChartTemplate string

var usageChart = template.Must(template.New("usage").Parse(usageChartTemplate))

// HTML is the chart as a figure: the SVG, its legend and the table.
func (c UsageChart) HTML() (template.HTML, error) {
	var buf bytes.Buffer
	if err := usageChart.ExecuteTemplate(&buf, "usagechart", c); err != nil {
		return "", fmt.Errorf("render usage chart: %w", err)
	}
	return template.HTML(buf.String()), nil // html/template's own escaped output
}
