package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pkg/diff/edit"
	"github.com/pkg/diff/myers"

	"github.com/agentplane/agentplane/internal/problem"
)

// VersionDiff is a side-by-side comparison of two versions of an agent,
// grouped by what a reader asks about first: an external version's
// endpoint, the steps of the plan, the CEL expressions, an external
// version's approvals, the policies, the model, the instructions, the
// limits, the tools, then the inputs and the description. A defined and an
// external version compare section by section: what one has and the other
// has not shows as added or removed.
type VersionDiff struct {
	From, To string // name@version
	Sections []DiffSection
}

// Changed reports whether any section differs.
func (d *VersionDiff) Changed() bool {
	return slices.ContainsFunc(d.Sections, func(s DiffSection) bool { return s.Changed })
}

// DiffSection is one part of the definitions, line by line.
type DiffSection struct {
	Name    string
	Changed bool
	Rows    []DiffRow
}

// The kinds of a DiffRow.
const (
	RowSame    = "same"
	RowChanged = "changed" // Left was replaced by Right
	RowRemoved = "removed" // only Left
	RowAdded   = "added"   // only Right
)

// DiffRow is a line of the left (From) and the right (To) definitions:
// LeftN and RightN are 1-based line numbers within the section, 0 where a
// side has no line.
type DiffRow struct {
	Kind          string
	Left, Right   string
	LeftN, RightN int
}

// DiffVersions compares two versions: their definitions, or their external
// blocks. Each definition must decode; a field error names the version it
// is in.
func DiffVersions(from, to *Version) (*VersionDiff, error) {
	a, err := readable(from)
	if err != nil {
		return nil, err
	}
	b, err := readable(to)
	if err != nil {
		return nil, err
	}
	d := &VersionDiff{From: from.Ref(), To: to.Ref()}
	for i, name := range sectionNames {
		d.Sections = append(d.Sections, diffLines(name, a[i], b[i]))
	}
	return d, nil
}

// sectionNames are the sections in the order readable gives them.
var sectionNames = []string{"Endpoint", "Steps", "Expressions", "Approvals", "Policies", "Model", "Instructions", "Limits", "Tools", "Inputs", "Description"}

// readable is v's definition, or external block, as lines per section
// (sectionNames' order).
func readable(v *Version) ([][]string, error) {
	if v.External != nil {
		return readableExternal(v), nil
	}
	def, errs := DecodeDefinition(v.Definition)
	if len(errs) > 0 {
		for i := range errs {
			errs[i].Field = v.Ref() + " " + errs[i].Field
		}
		return nil, problem.Validation(errs...)
	}
	out := make([][]string, len(sectionNames))
	steps, exprs, policies, model, instructions, limits, tools, inputs, description := &out[1], &out[2], &out[4], &out[5], &out[6], &out[7], &out[8], &out[9], &out[10]

	for _, s := range def.Steps {
		*steps = append(*steps, s.Action+": "+stepKind(s))
		expr := func(field, e string) {
			if e != "" {
				*exprs = append(*exprs, s.Action+"."+field+": "+e)
			}
		}
		expr("when", s.When)
		exprValues(s.Action+".args", s.Args, exprs)
		expr("score", s.Score)
		for j, c := range s.Route {
			expr(fmt.Sprintf("route[%d].when", j), c.When)
		}
		exprValues(s.Action+".set", s.Set, exprs)
		if s.Plan != nil {
			expr("plan.prompt", s.Plan.Prompt)
		}
		if s.Finish != nil && !s.Finish.Literal {
			expr("finish.outcome", s.Finish.Outcome)
		}
		if s.Approve != nil {
			expr("approve.when", s.Approve.When)
			expr("approve.reason", s.Approve.Reason)
		}
		if s.Plan != nil && s.Plan.Model != "" {
			*model = append(*model, s.Action+": "+s.Plan.Model)
		}
	}
	if def.Outcome != "" {
		*exprs = append(*exprs, "outcome: "+def.Outcome)
	}
	if def.Output != "" {
		*exprs = append(*exprs, "output: "+def.Output)
	}
	for _, name := range slices.Sorted(maps.Keys(def.Policies)) {
		*policies = append(*policies, name+": allow "+def.Policies[name].Allow)
	}
	if def.Model != "" {
		*model = append([]string{"agent: " + def.Model}, *model...)
	}
	*instructions = sentences(def.Instructions)
	if def.Limits != nil && def.Limits.MaxLLMTokens > 0 {
		*limits = append(*limits, fmt.Sprintf("max_llm_tokens: %d", def.Limits.MaxLLMTokens))
	}
	if def.Limits != nil {
		*limits = append(*limits, budgetLines(def.Limits.OnExhausted, def.Limits.Ask)...)
	}
	if def.MaxSteps > 0 {
		*limits = append(*limits, fmt.Sprintf("max_steps: %d", def.MaxSteps))
	}
	*tools = slices.Sorted(slices.Values(def.Tools))
	*inputs = indented(def.Inputs)
	if v.Description != "" {
		*description = []string{v.Description}
	}
	if def.Purpose != "" {
		*description = append(*description, "purpose: "+def.Purpose)
	}
	return out, nil
}

// readableExternal is v's external block as lines per section
// (sectionNames' order): it has no steps nor instructions; its url, auth
// and bounds are its endpoint, its approvals rules a section of their own.
func readableExternal(v *Version) [][]string {
	x := v.External
	out := make([][]string, len(sectionNames))
	endpoint, approvals, policies, model, limits, tools, inputs, description := &out[0], &out[3], &out[4], &out[5], &out[7], &out[8], &out[9], &out[10]

	*endpoint = append(*endpoint, "url: "+x.URL)
	if a := x.Auth; a != nil && a.Type != "" && a.Type != ExternalAuthNone {
		auth := "auth: " + a.Type
		if a.Header != "" {
			auth += " in " + a.Header
		}
		*endpoint = append(*endpoint, auth+", secret "+a.SecretsRef)
	}
	timeout, attempts := x.Timeout, fmt.Sprint(x.MaxAttempts)
	if timeout == "" {
		timeout = fmt.Sprintf("%v (default)", DefaultExternalTimeout)
	}
	if x.MaxAttempts == 0 {
		attempts = fmt.Sprintf("%d (default)", DefaultExternalMaxAttempts)
	}
	*endpoint = append(*endpoint, "timeout: "+timeout, "max_attempts: "+attempts)
	if x.MaxConcurrency > 0 {
		*endpoint = append(*endpoint, fmt.Sprintf("max_concurrency: %d", x.MaxConcurrency))
	}
	for i, a := range x.Approvals {
		*approvals = append(*approvals, ApprovalRuleText(i, a))
	}
	for _, name := range slices.Sorted(maps.Keys(x.Policies)) {
		*policies = append(*policies, name+": allow "+x.Policies[name].Allow)
	}
	for _, m := range x.ModelNames() {
		*model = append(*model, "may use: "+m)
	}
	if l := x.Limits; l != nil {
		if l.MaxLLMTokens > 0 {
			*limits = append(*limits, fmt.Sprintf("max_llm_tokens: %d", l.MaxLLMTokens))
		}
		if l.MaxToolCalls > 0 {
			*limits = append(*limits, fmt.Sprintf("max_tool_calls: %d", l.MaxToolCalls))
		}
		*limits = append(*limits, budgetLines(l.OnExhausted, l.Ask)...)
	}
	*tools = slices.Sorted(slices.Values(x.Tools))
	for _, op := range x.Operations {
		*tools = append(*tools, "offers: "+op)
	}
	*inputs = indented(x.Inputs)
	if v.Description != "" {
		*description = []string{v.Description}
	}
	return out
}

// ApprovalRuleText says what the i-th approvals rule of an external
// version holds and who decides, on one line.
func ApprovalRuleText(i int, a ApprovalRule) string {
	s := fmt.Sprintf("approvals[%d]: when %s", i, a.When)
	if a.Reason != "" {
		s += "; reason " + a.Reason
	}
	if a.ApproverScope != "" {
		s += "; by " + a.ApproverScope
	}
	if a.Timeout != "" {
		s += ", " + a.Timeout
	}
	if a.OnTimeout != "" {
		s += " then " + a.OnTimeout
	}
	if a.AllowSelf {
		s += ", the invoker may decide"
	}
	return s
}

// indented is a JSON Schema of inputs as indented lines, none when absent.
func indented(schema json.RawMessage) []string {
	if len(schema) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, schema, "", "  "); err != nil {
		return nil
	}
	return strings.Split(buf.String(), "\n")
}

// stepKind says what a step does, without its expressions (they are in
// the Expressions section).
func stepKind(s Step) string {
	var parts []string
	switch {
	case s.Call != "":
		parts = append(parts, "call "+s.Call)
	case s.Score != "":
		parts = append(parts, "score")
	case len(s.Route) > 0:
		queues := make([]string, len(s.Route))
		for i, c := range s.Route {
			queues[i] = c.Queue
		}
		parts = append(parts, "route to "+strings.Join(queues, " | "))
	case s.Set != nil:
		parts = append(parts, "set "+strings.Join(slices.Sorted(maps.Keys(s.Set)), ", "))
	case s.Goto != "":
		parts = append(parts, "go to "+s.Goto)
	case s.Plan != nil:
		p := "plan"
		if len(s.Plan.Operations) > 0 {
			p += " over " + strings.Join(s.Plan.Operations, ", ")
		}
		if s.Plan.MaxCalls > 0 {
			p += fmt.Sprintf(", at most %d calls", s.Plan.MaxCalls)
		}
		parts = append(parts, p)
	case s.Finish != nil:
		if s.Finish.Literal {
			parts = append(parts, "finish "+s.Finish.Outcome)
		} else {
			parts = append(parts, "finish")
		}
	case s.Approve != nil:
		a := "approval"
		if s.Approve.ApproverScope != "" {
			a += " by " + s.Approve.ApproverScope
		}
		if s.Approve.Timeout != "" {
			a += ", " + s.Approve.Timeout
		}
		if s.Approve.OnTimeout != "" {
			a += " then " + s.Approve.OnTimeout
		}
		if s.Approve.AllowSelf {
			a += ", the invoker may decide"
		}
		parts = append(parts, a)
	}
	saveAs := s.SaveAs
	if saveAs == "" && s.Plan != nil {
		saveAs = s.Plan.SaveAs
	}
	if saveAs != "" {
		parts = append(parts, "saves "+saveAs)
	}
	if s.When != "" {
		parts = append(parts, "when …")
	}
	if s.OnDenied != "" {
		parts = append(parts, "on denied "+s.OnDenied)
	}
	if s.OnError != "" {
		parts = append(parts, "on error "+s.OnError)
	}
	return strings.Join(parts, "; ")
}

// exprValues appends the CEL expressions of args or set (strings are
// expressions; objects and arrays nest) under path.
func exprValues(path string, v any, out *[]string) {
	switch v := v.(type) {
	case string:
		*out = append(*out, path+": "+v)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			exprValues(path+"."+k, v[k], out)
		}
	case []any:
		for i, e := range v {
			exprValues(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	case nil:
	default:
		*out = append(*out, fmt.Sprintf("%s: %v", path, v))
	}
}

// sentences splits instructions (a CEL string, often one literal, shown
// without its quotes) into sentences, one a line, so an added sentence
// shows as an added line.
func sentences(s string) []string {
	if s == "" {
		return nil
	}
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' && !strings.Contains(s[1:len(s)-1], "'") {
		s = s[1 : len(s)-1]
	}
	var out []string
	for line := range strings.Lines(s) {
		rest := strings.TrimRight(line, "\n")
		for {
			i := strings.Index(rest, ". ")
			if i < 0 {
				break
			}
			out = append(out, rest[:i+1])
			rest = rest[i+2:]
		}
		out = append(out, rest)
	}
	return out
}

// lines pairs two line lists for Myers' diff.
type lines struct{ a, b []string }

func (p lines) LenA() int             { return len(p.a) }
func (p lines) LenB() int             { return len(p.b) }
func (p lines) Equal(ai, bi int) bool { return p.a[ai] == p.b[bi] }

// diffLines aligns a and b by Myers' diff; a removal followed by an
// addition pairs up row by row as changed lines.
func diffLines(name string, a, b []string) DiffSection {
	sec := DiffSection{Name: name}
	script := myers.Diff(context.Background(), lines{a, b})
	rs := script.Ranges
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r.IsEqual():
			for k := range r.HighA - r.LowA {
				sec.Rows = append(sec.Rows, DiffRow{Kind: RowSame, Left: a[r.LowA+k], Right: b[r.LowB+k], LeftN: r.LowA + k + 1, RightN: r.LowB + k + 1})
			}
			continue
		case r.IsDelete():
			removed, added := r, edit.Range{LowA: r.HighA, HighA: r.HighA, LowB: r.LowB, HighB: r.LowB}
			if i+1 < len(rs) && rs[i+1].IsInsert() {
				added = rs[i+1]
				i++
			}
			n, m := removed.HighA-removed.LowA, added.HighB-added.LowB
			for k := range max(n, m) {
				row := DiffRow{Kind: RowChanged}
				if k < n {
					row.Left, row.LeftN = a[removed.LowA+k], removed.LowA+k+1
				} else {
					row.Kind = RowAdded
				}
				if k < m {
					row.Right, row.RightN = b[added.LowB+k], added.LowB+k+1
				} else {
					row.Kind = RowRemoved
				}
				sec.Rows = append(sec.Rows, row)
			}
		default: // an insertion alone
			for k := range r.HighB - r.LowB {
				sec.Rows = append(sec.Rows, DiffRow{Kind: RowAdded, Right: b[r.LowB+k], RightN: r.LowB + k + 1})
			}
		}
		sec.Changed = true
	}
	return sec
}

// budgetLines are the lines of a version's limits.on_exhausted and
// limits.ask, none when it keeps the default.
func budgetLines(onExhausted string, ask *BudgetAsk) []string {
	if onExhausted == "" {
		return nil
	}
	out := []string{"on_exhausted: " + onExhausted}
	if ask != nil {
		scope := ask.ApproverScope
		if scope == "" {
			scope = DefaultBudgetApproverScope
		}
		out = append(out, fmt.Sprintf("ask: approver_scope %s, timeout %s, on_timeout %s, allow_self %t",
			scope, orDefault(ask.Timeout, DefaultApprovalTimeout.String()), orDefault(ask.OnTimeout, DecisionDeny), ask.AllowSelf))
	}
	return out
}
