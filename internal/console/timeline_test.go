package console

import (
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// waitedAnHour is a refund that waited an hour for a person: its steps
// took 500 ms, as the runner records them (each step starts where the
// previous ended; the decided approval where the workflow resumed).
func waitedAnHour(status string) (*workflow.Workflow, []workflow.Step, int64) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ms := func(n int64) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	hour := int64(time.Hour / time.Millisecond)
	wf := &workflow.Workflow{ID: "wf_1", Agent: "refunds", AgentVersion: "1", Status: status, StartedAt: t0}
	steps := []workflow.Step{
		{Step: 1, Action: "fetch", Kind: "call", Status: "ok", StartedAt: ms(0), DurationMS: 300},
		{Step: 2, Action: "refund_approval", Kind: agent.KindApprove, Status: agent.StatusWaitingApproval, StartedAt: ms(300), DurationMS: 0},
	}
	if status == workflow.Waiting {
		return wf, steps, hour + 300
	}
	steps = append(steps,
		workflow.Step{Step: 3, Action: "refund_approval", Kind: agent.KindApprove, Status: "approved", StartedAt: ms(hour + 300), DurationMS: 0},
		workflow.Step{Step: 4, Action: "open_case", Kind: "call", Status: "ok", StartedAt: ms(hour + 300), DurationMS: 200})
	wf.FinishedAt = ms(hour + 500)
	return wf, steps, hour + 500
}

// TestTimelineCollapsesTheWaitForAnApproval: a workflow that waited an
// hour for an approval draws the wait as one collapsed segment labelled
// with its length, and its steps over the rest of the width, scaled to
// their own 500 ms.
func TestTimelineCollapsesTheWaitForAnApproval(t *testing.T) {
	wf, steps, total := waitedAnHour(workflow.Completed)
	tl := layoutTimeline(wf, steps, total)
	if len(tl.Gaps) != 1 || tl.Before[2] == nil || tl.After != nil {
		t.Fatalf("gaps %+v (before %v, after %v): want one, before step 3", tl.Gaps, tl.Before, tl.After)
	}
	g := tl.Gaps[0]
	if g.Label != "waited 1 h for approval" || g.W != gapWidth {
		t.Errorf("the wait: %+v", g)
	}
	if tl.ScaledMS != 500 {
		t.Errorf("the bars are scaled to %d ms, want the steps' 500", tl.ScaledMS)
	}
	fetch, open := tl.Bars[0], tl.Bars[3]
	// 300 and 200 ms of 500: 3/5 and 2/5 of the width the wait leaves.
	if want := int64((timelineWidth - gapWidth) * 3 / 5); fetch != [2]int64{0, want} {
		t.Errorf("fetch's bar %v, want [0 %d]", fetch, want)
	}
	if fetch[1]+open[1] < timelineWidth*9/10 {
		t.Errorf("fetch and open_case take %d and %d of %d: want most of the width", fetch[1], open[1], timelineWidth)
	}
	// The bars and the wait follow each other, without overlap.
	if g.X != fetch[0]+fetch[1] || open[0] != g.X+g.W || open[0]+open[1] != timelineWidth {
		t.Errorf("fetch %v, the wait at %d+%d, open_case %v: want them end to end", fetch, g.X, g.W, open)
	}

	var page strings.Builder
	data := workflowPage{Workflow: wf, DurationMS: total, Finished: true, Gaps: tl.Gaps, ScaledMS: tl.ScaledMS}
	for i, st := range steps {
		data.Steps = append(data.Steps, stepLine{Step: st, N: st.Step, BarX: tl.Bars[i][0], BarW: tl.Bars[i][1], Gap: tl.Before[i]})
	}
	if err := Render(&page, "workflow", Page{Title: "w", User: &User{Subject: "ann"}, Data: data}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if strings.Count(html, `<li class="gap">`) != 1 || !strings.Contains(html, "waited 1 h for approval") ||
		!strings.Contains(html, "scaled to the 500 ms the steps took") {
		t.Errorf("the page does not show the wait as one collapsed segment:\n%s", html)
	}
	if gap, step3 := strings.Index(html, `<li class="gap">`), strings.Index(html, `id="step-3"`); gap > step3 || gap < strings.Index(html, `id="step-2"`) {
		t.Error("the wait is not drawn between the approval asked and the approval decided")
	}
}

// TestTimelineOfAWorkflowThatStillWaits: the wait runs to now, after the
// last step, and says so.
func TestTimelineOfAWorkflowThatStillWaits(t *testing.T) {
	wf, steps, total := waitedAnHour(workflow.Waiting)
	tl := layoutTimeline(wf, steps, total)
	if len(tl.Gaps) != 1 || tl.After == nil || tl.After.Label != "waiting for approval: 1 h so far" {
		t.Fatalf("gaps %+v, after %+v", tl.Gaps, tl.After)
	}
	if fetch := tl.Bars[0]; fetch[1] != timelineWidth-gapWidth {
		t.Errorf("fetch's bar %v: want all the width but the wait's", fetch)
	}
}

// TestTimelineWithoutWaits: steps back to back keep the plain scale, and a
// short pause for an approval (under a second) is not collapsed.
func TestTimelineWithoutWaits(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	wf := &workflow.Workflow{StartedAt: t0, Status: workflow.Completed}
	steps := []workflow.Step{
		{Step: 1, Kind: "call", StartedAt: t0, DurationMS: 100},
		{Step: 2, Kind: agent.KindApprove, Status: agent.StatusWaitingApproval, StartedAt: t0.Add(100 * time.Millisecond)},
		{Step: 3, Kind: agent.KindApprove, Status: "approved", StartedAt: t0.Add(600 * time.Millisecond)},
		{Step: 4, Kind: "call", StartedAt: t0.Add(600 * time.Millisecond), DurationMS: 400},
	}
	tl := layoutTimeline(wf, steps, 1000)
	if len(tl.Gaps) != 0 || tl.ScaledMS != 1000 {
		t.Fatalf("gaps %+v scaled to %d", tl.Gaps, tl.ScaledMS)
	}
	if got := tl.Bars; got[0] != [2]int64{0, 100} || got[3] != [2]int64{600, 400} || got[1] != [2]int64{100, minBarWidth} {
		t.Errorf("bars %v", got)
	}
}

func TestFormatWait(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45 s", 185 * time.Second: "3 min 5 s", 25 * time.Minute: "25 min",
		time.Hour: "1 h", 2*time.Hour + 14*time.Minute + 30*time.Second: "2 h 14 min", 74 * time.Hour: "3 d 2 h", 48 * time.Hour: "2 d",
	} {
		if got := FormatWait(d); got != want {
			t.Errorf("FormatWait(%s) = %q, want %q", d, got, want)
		}
	}
}
