package console

import (
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/workflow"
)

// A workflow's timeline draws each step as a bar on one axis of
// timelineWidth units. A wait, a span of a second or more in which no step
// ran, that followed a step asking for an approval (or that is longer than
// all the steps' own time together, as when the workflow was resumed after
// its process died), is collapsed to a segment of gapWidth units labelled
// with its length; the steps are scaled to the rest of the time, so an
// hour's wait for a person leaves each step a visible share of the width.
const (
	timelineWidth = 1000
	gapWidth      = 40
	// minBarWidth keeps a step of no measurable time visible.
	minBarWidth = 4
	// minGapMS is the shortest wait that is collapsed.
	minGapMS = 1000
)

// gapLine is a collapsed wait: its place on the axis and what it says.
type gapLine struct {
	X, W  int64
	Label string
}

// timeline is a workflow's steps laid out: a bar for each step and the
// collapsed waits, each before the step that followed it (After: after the
// last step).
type timeline struct {
	// Bars are the steps' [x, width], in the steps' order.
	Bars [][2]int64
	// Before maps a step's index to the wait collapsed just before it.
	Before map[int]*gapLine
	After  *gapLine
	// Gaps are all the collapsed waits, in order; ScaledMS is the time the
	// bars are scaled to (the workflow's duration less the waits).
	Gaps     []*gapLine
	ScaledMS int64
}

// wait is a span of the workflow's time in which no step ran: from and to
// are milliseconds since the workflow started; before is the index of the
// step that followed (len(steps) for the end of the workflow).
type wait struct {
	from, to int64
	before   int
	approval bool
	// open: the workflow still waits.
	open bool
}

// layoutTimeline lays out the steps of wf, totalMS long.
func layoutTimeline(wf *workflow.Workflow, steps []workflow.Step, totalMS int64) timeline {
	totalMS = max(totalMS, 1)
	spans := make([][2]int64, len(steps))
	var waits []wait
	cursor, asked := int64(0), false
	for i, st := range steps {
		from := cursor
		if !st.StartedAt.IsZero() {
			from = min(totalMS, max(0, st.StartedAt.Sub(wf.StartedAt).Milliseconds()))
		}
		if from > cursor {
			waits = append(waits, wait{from: cursor, to: from, before: i, approval: asked})
		}
		spans[i] = [2]int64{from, min(totalMS, from+max(st.DurationMS, 0))}
		cursor = max(cursor, spans[i][1])
		asked = st.Kind == agent.KindApprove && st.Status == agent.StatusWaitingApproval
	}
	if totalMS > cursor {
		waits = append(waits, wait{from: cursor, to: totalMS, before: len(steps), approval: asked, open: wf.Status == workflow.Waiting})
	}
	idle := int64(0)
	for _, w := range waits {
		idle += w.to - w.from
	}
	var collapsed []wait
	for _, w := range waits {
		if long := w.to - w.from; long >= minGapMS && (w.approval || long > totalMS-idle) {
			collapsed = append(collapsed, w)
		}
	}
	t := timeline{Before: map[int]*gapLine{}, ScaledMS: totalMS}
	for _, w := range collapsed {
		t.ScaledMS -= w.to - w.from
	}
	t.ScaledMS = max(t.ScaledMS, 1)
	room := int64(timelineWidth - gapWidth*len(collapsed))
	// at places a moment on the axis: scaled outside the waits, spread over
	// the gap's width inside one.
	at := func(ms int64) int64 {
		x, last := int64(0), int64(0)
		for _, w := range collapsed {
			if ms < w.from {
				break
			}
			x += (w.from - last) * room / t.ScaledMS
			if ms < w.to {
				return x + (ms-w.from)*gapWidth/(w.to-w.from)
			}
			x += gapWidth
			last = w.to
		}
		return x + (ms-last)*room/t.ScaledMS
	}
	for _, w := range collapsed {
		g := &gapLine{X: at(w.from), W: gapWidth, Label: waitLabel(w)}
		t.Gaps = append(t.Gaps, g)
		if w.before < len(steps) {
			t.Before[w.before] = g
		} else {
			t.After = g
		}
	}
	for _, s := range spans {
		x := min(timelineWidth-minBarWidth, at(s[0]))
		t.Bars = append(t.Bars, [2]int64{x, min(timelineWidth-x, max(minBarWidth, at(s[1])-x))})
	}
	return t
}

// waitLabel says what a collapsed wait was and how long it took.
func waitLabel(w wait) string {
	long := FormatWait(time.Duration(w.to-w.from) * time.Millisecond)
	switch {
	case w.approval && w.open:
		return "waiting for approval: " + long + " so far"
	case w.approval:
		return "waited " + long + " for approval"
	}
	return "nothing ran for " + long
}

// FormatWait writes a long span as people say it: "45 s", "3 min 5 s",
// "2 h 14 min", "3 d 2 h".
func FormatWait(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", s)
	case s < 600 && s%60 != 0:
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	case s < 3600:
		return fmt.Sprintf("%d min", s/60)
	case s < 48*3600:
		if m := s % 3600 / 60; m != 0 {
			return fmt.Sprintf("%d h %d min", s/3600, m)
		}
		return fmt.Sprintf("%d h", s/3600)
	}
	if h := s % 86400 / 3600; h != 0 {
		return fmt.Sprintf("%d d %d h", s/86400, h)
	}
	return fmt.Sprintf("%d d", s/86400)
}
