// Package impact answers what a revision of a tool's description breaks
// (SPEC §4 "Tool drift"): the deployed agent versions whose steps or args
// no longer fit it, and the recorded calls of a recent period whose
// arguments or responses no longer validate against its schemas.
package impact

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Bounds of an impact.
const (
	// DefaultSince is how far back recorded calls are checked by default.
	DefaultSince = 7 * 24 * time.Hour
	// MaxSince bounds since.
	MaxSince = 90 * 24 * time.Hour
	// MaxCallsChecked bounds the recorded calls checked, newest first.
	MaxCallsChecked = 10000
	// MaxCallsListed bounds the calls listed; Total counts them all.
	MaxCallsListed = 100
)

// Kinds of a version's problem.
const (
	ProblemOperationRemoved = "operation_removed"
	ProblemArgumentRemoved  = "argument_removed"
	ProblemRequiredMissing  = "required_missing"
	ProblemLiteralInvalid   = "literal_invalid"
	ProblemAllowList        = "allow_list"
)

// Impact is what a revision breaks.
type Impact struct {
	Tool     string `json:"tool"`
	Revision int    `json:"revision"`
	Status   string `json:"status"`
	Breaking bool   `json:"breaking"`
	// Impacted reports that a version or a recorded call is listed.
	Impacted bool            `json:"impacted"`
	Since    time.Time       `json:"since"`
	Versions []VersionImpact `json:"versions"`
	Calls    Calls           `json:"calls"`
}

// VersionImpact is a deployed agent version the revision breaks.
type VersionImpact struct {
	Agent    string    `json:"agent"`
	Version  string    `json:"version"`
	Default  bool      `json:"default"`
	External bool      `json:"external,omitempty"`
	Problems []Problem `json:"problems"`
}

// Problem is one way a version breaks.
type Problem struct {
	Kind string `json:"kind"`
	// Step is the step's action (empty for an external version).
	Step      string `json:"step,omitempty"`
	Operation string `json:"operation,omitempty"`
	Path      string `json:"path,omitempty"`
	Detail    string `json:"detail"`
}

// Calls are the recorded calls that no longer fit the revision.
type Calls struct {
	// Checked is how many recorded calls of the period were checked;
	// Truncated, that the period had more than MaxCallsChecked (the newest
	// were checked).
	Checked   int  `json:"checked"`
	Truncated bool `json:"truncated"`
	// Total counts the calls that no longer fit; Items lists the first
	// MaxCallsListed, newest first.
	Total int         `json:"total"`
	Items []CallIssue `json:"items"`
}

// CallIssue is a recorded call that no longer fits.
type CallIssue struct {
	WorkflowID string    `json:"workflow_id"`
	Step       int       `json:"step"`
	Action     string    `json:"action,omitempty"`
	Operation  string    `json:"operation"`
	At         time.Time `json:"at"`
	// Part is what no longer fits: "operation" (removed), "args" or
	// "response".
	Part   string   `json:"part"`
	Errors []string `json:"errors"`
}

// Service computes impacts.
type Service struct {
	Tools *tool.Service
	Store Store
	Now   func() time.Time
}

// Of answers the impact of revision n of tool id on the tenant's deployed
// versions and on the calls recorded since now-since.
func (s *Service) Of(ctx context.Context, tenant, id string, n int, since time.Duration) (*Impact, error) {
	t, r, ops, err := s.Tools.RevisionOperations(ctx, tenant, id, n)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	from := now().UTC().Add(-since)
	out := &Impact{Tool: t.Name, Revision: r.N, Status: r.Status, Breaking: r.Diff.Breaking(), Since: from,
		Versions: []VersionImpact{}, Calls: Calls{Items: []CallIssue{}}}
	c := newChecker(t.Name, r.Diff, ops)
	vs, err := s.Store.VersionsUsingTool(ctx, tenant, t.Name)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if vi := c.version(v); len(vi.Problems) > 0 {
			out.Versions = append(out.Versions, vi)
		}
	}
	err = s.Store.ToolCalls(ctx, tenant, t.Name, from, MaxCallsChecked+1, func(st *workflow.Step) error {
		if out.Calls.Checked == MaxCallsChecked {
			out.Calls.Truncated = true
			return nil
		}
		out.Calls.Checked++
		issue, ok := c.call(st)
		if !ok {
			return nil
		}
		out.Calls.Total++
		if len(out.Calls.Items) < MaxCallsListed {
			out.Calls.Items = append(out.Calls.Items, issue)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Impacted = len(out.Versions) > 0 || out.Calls.Total > 0
	return out, nil
}

// ParseSince reads the since parameter: a Go duration, or a number of days
// with "d" ("7d"); empty is DefaultSince.
func ParseSince(v string) (time.Duration, error) {
	if v == "" {
		return DefaultSince, nil
	}
	d, err := time.ParseDuration(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
	}
	if err != nil || d <= 0 || d > MaxSince {
		return 0, problem.Field("since", "since %q is not a period: give a Go duration or days (\"72h\", \"7d\"), more than 0 and at most 90d", v)
	}
	return d, nil
}

// checker judges versions and calls against one revision.
type checker struct {
	tool    string
	diff    tool.Diff
	removed map[string]bool
	changed map[string]*tool.ChangedOperation
	ops     map[string]*opSchemas
}

// opSchemas are a changed operation's schemas in the revision.
type opSchemas struct {
	input      map[string]any
	in, output *call.Schema
}

func newChecker(toolName string, d tool.Diff, ops []tool.Operation) *checker {
	c := &checker{tool: toolName, diff: d, removed: map[string]bool{}, changed: map[string]*tool.ChangedOperation{}, ops: map[string]*opSchemas{}}
	for _, id := range d.Removed {
		c.removed[id] = true
	}
	for i := range d.Changed {
		c.changed[d.Changed[i].Operation] = &d.Changed[i]
	}
	for i := range ops {
		if _, ok := c.changed[ops[i].ID]; ok {
			var input map[string]any
			_ = json.Unmarshal(ops[i].Input, &input) // a stored schema is valid JSON
			c.ops[ops[i].ID] = &opSchemas{input: input, in: call.CompileSchema(ops[i].Input), output: call.CompileSchema(ops[i].Output)}
		}
	}
	return c
}

// version lists how the revision breaks a deployed version.
func (c *checker) version(v *agent.Version) VersionImpact {
	vi := VersionImpact{Agent: v.Name, Version: v.Version, Default: v.Default, External: v.External != nil, Problems: []Problem{}}
	if v.External != nil {
		if slices.Contains(v.External.Tools, c.tool) && c.diff.Breaking() {
			vi.Problems = append(vi.Problems, Problem{Kind: ProblemAllowList,
				Detail: fmt.Sprintf("its tools allow-list names %s, whose operations %s changed in a breaking way; its recorded calls are checked below", c.tool, strings.Join(c.breakingOps(), ", "))})
		}
		for _, name := range v.External.Operations {
			if op, ok := strings.CutPrefix(name, c.tool+"."); ok && c.removed[op] {
				vi.Problems = append(vi.Problems, Problem{Kind: ProblemOperationRemoved, Operation: op,
					Detail: fmt.Sprintf("its operations offer %s, which the revision removes: the version no longer compiles, and its invocations are refused", name)})
			}
		}
		return vi
	}
	def, errs := agent.DecodeDefinition(v.Definition)
	if len(errs) > 0 {
		return vi
	}
	for _, st := range def.Steps {
		if st.Plan != nil {
			for _, name := range st.Plan.Operations {
				if op, ok := strings.CutPrefix(name, c.tool+"."); ok && c.removed[op] {
					vi.Problems = append(vi.Problems, Problem{Kind: ProblemOperationRemoved, Step: st.Action, Operation: op,
						Detail: fmt.Sprintf("the plan step offers %s, which the revision removes", name)})
				}
			}
		}
		op, ok := strings.CutPrefix(st.Call, c.tool+".")
		if !ok {
			continue
		}
		if c.removed[op] {
			vi.Problems = append(vi.Problems, Problem{Kind: ProblemOperationRemoved, Step: st.Action, Operation: op,
				Detail: fmt.Sprintf("the step calls %s, which the revision removes", st.Call)})
			continue
		}
		args, ok := st.Args.(map[string]any)
		if ch := c.changed[op]; ch != nil && ch.Breaking && ok {
			vi.Problems = append(vi.Problems, c.args(st.Action, op, ch, args)...)
		}
	}
	return vi
}

// breakingOps names the operations removed or changed in a breaking way.
func (c *checker) breakingOps() []string {
	out := slices.Clone(c.diff.Removed)
	for _, ch := range c.diff.Changed {
		if ch.Breaking {
			out = append(out, ch.Operation)
		}
	}
	slices.Sort(out)
	return out
}

// args checks a step's literal args object against an operation's
// breaking changes: an argument passed that was removed or renamed, a
// required one not passed, a literal the new schema refuses. An argument
// given by an expression is judged only by its presence.
func (c *checker) args(step, op string, ch *tool.ChangedOperation, args map[string]any) []Problem {
	var out []Problem
	add := func(kind string, path string, format string, a ...any) {
		out = append(out, Problem{Kind: kind, Step: step, Operation: op, Path: path, Detail: fmt.Sprintf(format, a...)})
	}
	for _, x := range ch.Changes {
		if !x.Breaking || strings.HasPrefix(x.Path, "response") {
			continue
		}
		v, present, known := lookup(args, x.Path)
		switch x.Kind {
		case tool.ChangeParameterRemoved, tool.ChangeParameterRenamed:
			if present {
				add(ProblemArgumentRemoved, x.Path, "args pass %s: %s", x.Path, x.Detail)
			}
		case tool.ChangeRequiredAdded:
			if !present && known {
				add(ProblemRequiredMissing, x.Path, "args do not pass %s: %s", x.Path, x.Detail)
			}
		case tool.ChangeTypeChanged, tool.ChangeEnumNarrowed, tool.ChangeFormatChanged:
			lit, isLit := literal(v)
			if !present || !isLit {
				continue
			}
			sch := call.CompileSchema(schemaAt(c.ops[op].input, x.Path))
			doc, _ := json.Marshal(lit)
			if errs := sch.Check(doc, x.Path); len(errs) > 0 {
				add(ProblemLiteralInvalid, x.Path, "args pass %s as %s, which the revision refuses: %s (%s)", x.Path, doc, errs[0].Message, x.Detail)
			}
		}
	}
	return out
}

// lookup finds path ("a.b", "ids[]" not followed) in a step's args:
// present when it is there; known when the args say it is not (its object
// is written out and lacks it; an object above it that is left out, or an
// expression standing for one, says nothing).
func lookup(args map[string]any, path string) (v any, present, known bool) {
	var cur any = args
	parts := strings.Split(path, ".")
	for i, part := range parts {
		m, ok := cur.(map[string]any)
		if !ok || strings.HasSuffix(part, "[]") {
			return nil, false, false
		}
		cur, ok = m[part]
		if !ok {
			return nil, false, i == len(parts)-1
		}
	}
	return cur, true, true
}

// literal is the value a step's arg stands for when it is a literal: a
// number, bool or null as it is, a CEL string, number or bool literal.
func literal(v any) (any, bool) {
	s, ok := v.(string)
	if !ok {
		_, obj := v.(map[string]any)
		_, arr := v.([]any)
		return v, !obj && !arr
	}
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] && !strings.ContainsRune(s[1:len(s)-1], rune(s[0])) {
		return s[1 : len(s)-1], true
	}
	switch s {
	case "true":
		return true, true
	case "false":
		return false, true
	case "null":
		return nil, true
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && strings.Contains(s, ".") {
		return f, true
	}
	return nil, false
}

// schemaAt is the JSON text of the schema at an argument's path in an
// input schema; nil when there is none.
func schemaAt(input map[string]any, path string) json.RawMessage {
	cur := input
	for part := range strings.SplitSeq(path, ".") {
		props, _ := cur["properties"].(map[string]any)
		next, ok := props[part].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	b, _ := json.Marshal(cur)
	return b
}

// call checks a recorded call against the revision: its operation
// removed, its args no longer validating (an argument the revision no
// longer defines included), its response (of an ok call) no longer
// validating. Calls of unchanged operations fit as they did.
func (c *checker) call(s *workflow.Step) (CallIssue, bool) {
	issue := CallIssue{WorkflowID: s.WorkflowID, Step: s.Step, Action: s.Action, Operation: s.Operation, At: s.StartedAt}
	if c.removed[s.Operation] {
		issue.Part, issue.Errors = "operation", []string{fmt.Sprintf("operation %s was removed", s.Operation)}
		return issue, true
	}
	sch := c.ops[s.Operation]
	if sch == nil {
		return issue, false
	}
	args := []byte(s.Args)
	if len(args) == 0 {
		args = []byte("{}")
	}
	errs := fieldErrors(sch.in.Check(args, "args"))
	errs = append(errs, removedArgs(c.changed[s.Operation], args)...)
	if len(errs) > 0 {
		issue.Part, issue.Errors = "args", errs
		return issue, true
	}
	if s.Status == agent.StatusOK && len(s.Result) > 0 {
		errs := fieldErrors(sch.output.Check(s.Result, "response"))
		errs = append(errs, removedFields(c.changed[s.Operation], s.Result)...)
		if len(errs) > 0 {
			issue.Part, issue.Errors = "response", errs
			return issue, true
		}
	}
	return issue, false
}

// removedFields names the fields of a recorded response that the revision
// removes from the result: a response still validates without them, but
// what read them no longer finds them.
func removedFields(ch *tool.ChangedOperation, result []byte) []string {
	var doc any
	if json.Unmarshal(result, &doc) != nil {
		return nil
	}
	var out []string
	for _, x := range ch.Changes {
		path, ok := strings.CutPrefix(x.Path, "response.")
		if !ok || x.Kind != tool.ChangeResponseFieldRemoved {
			continue
		}
		m, _ := doc.(map[string]any)
		if _, present, _ := lookup(m, path); present {
			out = append(out, x.Path+": "+x.Detail+" (this response had it)")
		}
	}
	return out
}

func fieldErrors(fes []problem.FieldError) []string {
	out := make([]string, 0, len(fes))
	for _, fe := range fes {
		out = append(out, fe.Field+": "+fe.Message)
	}
	return out
}

// removedArgs names the top-level arguments a call passed that the
// revision removed or renamed (an input schema may leave other names free).
func removedArgs(ch *tool.ChangedOperation, args []byte) []string {
	var passed map[string]json.RawMessage
	if json.Unmarshal(args, &passed) != nil {
		return nil
	}
	var out []string
	for _, x := range ch.Changes {
		if x.Kind != tool.ChangeParameterRemoved && x.Kind != tool.ChangeParameterRenamed {
			continue
		}
		if _, ok := passed[x.Path]; ok {
			out = append(out, "args/"+x.Path+": "+x.Detail)
		}
	}
	return out
}
