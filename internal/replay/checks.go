package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/fault"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Built-in checks, named without an expression.
const (
	CheckOutcomeUnchanged = "outcome_unchanged"
	CheckOutputUnchanged  = "output_unchanged"
	CheckSameToolCalls    = "same_tool_calls"
	CheckExpectedOutcome  = "expected_outcome"
	// CheckJudge is the name of the LLM-as-judge check.
	CheckJudge = "judge"
)

// Verdicts of a batch with checks.
const (
	VerdictPassed = "passed"
	VerdictFailed = "failed"
)

// MaxChecks is the most checks one batch runs.
const MaxChecks = 32

// DefaultPassScore is the judge's pass score when the request gives none.
const DefaultPassScore = 0.7

var (
	builtinChecks = []string{CheckOutcomeUnchanged, CheckOutputUnchanged, CheckSameToolCalls, CheckExpectedOutcome}
	checkNameRE   = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,62}$`)
)

// CheckSpec is one check a batch asks for: a CEL expression, or a built-in
// named without one.
type CheckSpec struct {
	Name string `json:"name"`
	Expr string `json:"expr,omitempty"`
}

// JudgeSpec asks a model to score each replay 0..1 against a rubric; a
// replay passes at PassScore or above.
type JudgeSpec struct {
	Model     string   `json:"model"`
	Rubric    string   `json:"rubric"`
	PassScore *float64 `json:"pass_score,omitempty"`
}

// Spec is what a batch checks and gates; it is stored with the batch so a
// resumed batch checks its remaining workflows the same way.
type Spec struct {
	Checks []CheckSpec `json:"checks,omitempty"`
	Judge  *JudgeSpec  `json:"judge,omitempty"`
	// Gate is the minimum pass rate (0..1) of each gated check.
	Gate map[string]float64 `json:"gate,omitempty"`
	// Faults are injected into every replay of the batch (see package
	// fault): stored here so a resumed batch injects the same.
	Faults []fault.Fault `json:"faults,omitempty"`
}

// Empty reports whether the spec checks nothing.
func (s Spec) Empty() bool { return len(s.Checks) == 0 && s.Judge == nil }

// Names are the spec's check names, in order; the judge's comes last.
func (s Spec) Names() []string {
	names := make([]string, 0, len(s.Checks)+1)
	for _, c := range s.Checks {
		names = append(names, c.Name)
	}
	if s.Judge != nil {
		names = append(names, CheckJudge)
	}
	return names
}

// CheckResult is how one replay fared against one check. Errored results
// (Error set) count as neither passed nor failed.
type CheckResult struct {
	Name   string   `json:"name"`
	Passed bool     `json:"passed"`
	Error  string   `json:"error,omitempty"`
	Score  *float64 `json:"score,omitempty"`
	Reason string   `json:"reason,omitempty"`
	// Judge is the judge model's exchange, kept so the result reads the
	// same every time it is fetched.
	Judge *JudgeRecord `json:"judge,omitempty"`
}

// CheckTotal counts a batch's results of one check. PassRate is Passed over
// all the results, errored ones included (0 before any).
type CheckTotal struct {
	Name     string  `json:"name"`
	Passed   int     `json:"passed"`
	Failed   int     `json:"failed"`
	Errored  int     `json:"errored"`
	PassRate float64 `json:"pass_rate"`
	// Gate is the check's minimum pass rate, when it is gated.
	Gate *float64 `json:"gate,omitempty"`
}

// Checks are a spec compiled: what a batch runs on each replay.
type Checks struct {
	spec  Spec
	exprs map[string]cel.Program
	judge Judge
}

var checkEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("original", cel.DynType),
		cel.Variable("replay", cel.DynType),
		cel.Variable("expected", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(), ext.Math(), ext.Lists(), ext.Encoders(),
	)
})

// CompileChecks validates a batch's checks and gate and compiles its
// expressions; the validation error names each bad field
// (checks[i].expr, gate.<name>, judge.pass_score …).
func CompileChecks(s Spec, judge Judge) (*Checks, error) {
	env, err := checkEnv()
	if err != nil {
		return nil, err
	}
	return compileChecks(s, judge, env, builtinChecks, "original, replay and expected")
}

var runCheckEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("run", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(), ext.Math(), ext.Lists(), ext.Encoders(),
	)
})

// CompileRunChecks validates and compiles the checks of single runs (a
// canary's: each sees its finished workflow as run, a Side, e.g.
// run.outcome != 'failed'); they have no built-ins and no judge.
func CompileRunChecks(s Spec) (*Checks, error) {
	env, err := runCheckEnv()
	if err != nil {
		return nil, err
	}
	return compileChecks(s, nil, env, nil, "run")
}

// RunOn checks one finished run, as CompileRunChecks' checks see it.
func (c *Checks) RunOn(ctx context.Context, run Side) []CheckResult {
	if c == nil || c.spec.Empty() {
		return nil
	}
	var m map[string]any
	err := roundTrip(run, &m)
	out := make([]CheckResult, 0, len(c.spec.Checks))
	for _, cs := range c.spec.Checks {
		res := CheckResult{Name: cs.Name}
		prg, ok := c.exprs[cs.Name]
		switch {
		case err != nil:
			res.Error = "prepare run: " + err.Error()
		case !ok:
			res.Error = "no expression"
		default:
			res.Passed, res.Error = evalCheck(ctx, prg, map[string]any{"run": m})
		}
		out = append(out, res)
	}
	return out
}

// RunSide is a finished workflow as checks see it, with its steps and the
// usage of its completions.
func RunSide(wf *workflow.Workflow, steps []workflow.Step, usage *Usage) Side {
	s := Side{Outcome: wf.Outcome, Output: wf.Output, Status: wf.Status, Steps: []StepView{}, ToolCalls: []CallView{}, Usage: usage}
	for i := range steps {
		s.add(&steps[i])
	}
	return s
}

// compileChecks is CompileChecks in env, whose variables vars names, with
// the built-ins named.
func compileChecks(s Spec, judge Judge, env *cel.Env, builtins []string, vars string) (*Checks, error) {
	var errs []problem.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, problem.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	c := &Checks{spec: s, exprs: map[string]cel.Program{}, judge: judge}
	if len(s.Checks) > MaxChecks {
		add("checks", "lists %d checks, over the limit of %d", len(s.Checks), MaxChecks)
	}
	seen := map[string]bool{}
	for i, cs := range s.Checks {
		field := "checks[" + strconv.Itoa(i) + "]"
		switch {
		case cs.Name == CheckJudge:
			add(field+".name", "judge is the name of the LLM-as-judge check: ask for it with judge {model, rubric, pass_score}")
			continue
		case !checkNameRE.MatchString(cs.Name):
			add(field+".name", "%q is not a check name: use 1 to 63 lowercase letters, digits, _, . and -, starting with a letter", cs.Name)
			continue
		case seen[cs.Name]:
			add(field+".name", "%q names another check already: give each check its own name", cs.Name)
			continue
		}
		seen[cs.Name] = true
		if strings.TrimSpace(cs.Expr) == "" {
			if !slices.Contains(builtins, cs.Name) {
				add(field+".expr", "is required: %q is not a built-in check%s; give a CEL expression over %s", cs.Name, builtinList(builtins), vars)
			}
			continue
		}
		prg, msg := compileCheck(env, cs.Expr)
		if msg != "" {
			add(field+".expr", "%s", msg)
			continue
		}
		c.exprs[cs.Name] = prg
	}
	if j := s.Judge; j != nil {
		seen[CheckJudge] = true
		if strings.TrimSpace(j.Model) == "" {
			add("judge.model", "is required: the name of a registered model (GET /v1/models)")
		}
		if strings.TrimSpace(j.Rubric) == "" {
			add("judge.rubric", "is required: say what a good replay does, for the judge to score it 0..1")
		} else if len(j.Rubric) > 16<<10 {
			add("judge.rubric", "is %d bytes, over the limit of 16384", len(j.Rubric))
		}
		if p := j.PassScore; p != nil && (math.IsNaN(*p) || *p < 0 || *p > 1) {
			add("judge.pass_score", "must be from 0 to 1 (default %.1f)", DefaultPassScore)
		}
		if judge == nil {
			add("judge", "this server has no judge: its operator wires one to the model clients")
		}
	}
	gated := make([]string, 0, len(s.Gate))
	for name := range s.Gate {
		gated = append(gated, name)
	}
	slices.Sort(gated)
	for _, name := range gated {
		rate := s.Gate[name]
		switch {
		case !seen[name]:
			add("gate."+name, "names no check of this batch: gate one of %s", quoteList(s.Names()))
		case math.IsNaN(rate) || rate < 0 || rate > 1:
			add("gate."+name, "must be a minimum pass rate from 0 to 1")
		}
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	return c, nil
}

func builtinList(builtins []string) string {
	if len(builtins) == 0 {
		return ""
	}
	return " (" + strings.Join(builtins, ", ") + ")"
}

func quoteList(names []string) string {
	if len(names) == 0 {
		return "(none: the batch has no checks)"
	}
	return strings.Join(names, ", ")
}

// compileCheck parses, type-checks and plans a check's expression, which
// must give a bool; the message says what is wrong.
func compileCheck(env *cel.Env, src string) (cel.Program, string) {
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, "is not a valid CEL expression: " + iss.Err().Error()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Sprintf("gives %s, want bool: a check passes when its expression is true", t)
	}
	if msg := agent.OverCostLimit(env, ast); msg != "" {
		return nil, msg
	}
	prg, err := env.Program(ast, cel.CostLimit(agent.CostLimit), cel.InterruptCheckFrequency(100), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, "cannot be planned: " + err.Error()
	}
	return prg, ""
}

// Spec is the spec the checks were compiled from.
func (c *Checks) Spec() Spec { return c.spec }

// Side is one run as checks see it: the original or the replay.
type Side struct {
	Outcome   string          `json:"outcome"`
	Output    json.RawMessage `json:"output"`
	Status    string          `json:"status"`
	Steps     []StepView      `json:"steps"`
	ToolCalls []CallView      `json:"tool_calls"`
	// Usage is the side's completions, tokens and cost (null when the
	// replay kept no usage).
	Usage *Usage `json:"usage"`
}

// StepView is a step as checks see it.
type StepView struct {
	Step      int             `json:"step"`
	Action    string          `json:"action"`
	Kind      string          `json:"kind"`
	Status    string          `json:"status"`
	Tool      string          `json:"tool,omitempty"`
	Operation string          `json:"operation,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	Outcome   string          `json:"outcome,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// CallView is a tool call (made or not) as checks see it.
type CallView struct {
	Tool      string          `json:"tool"`
	Operation string          `json:"operation"`
	Args      json.RawMessage `json:"args"`
	Status    string          `json:"status"`
}

// Case is what the checks of one replay look at.
type Case struct {
	Tenant   string
	Original Side
	Replay   Side
	// Expected is the dataset's expectation of the workflow, or nil.
	Expected *Expectation
}

// Run checks one replay; a check that cannot be evaluated gets an error
// result, never an error: the batch goes on.
func (c *Checks) Run(ctx context.Context, k Case) []CheckResult {
	if c == nil || c.spec.Empty() {
		return nil
	}
	out := make([]CheckResult, 0, len(c.spec.Checks)+1)
	var act map[string]any
	for _, cs := range c.spec.Checks {
		res := CheckResult{Name: cs.Name}
		if prg, ok := c.exprs[cs.Name]; ok {
			if act == nil {
				var err error
				if act, err = k.activation(); err != nil {
					res.Error = err.Error()
					out = append(out, res)
					continue
				}
			}
			res.Passed, res.Error = evalCheck(ctx, prg, act)
		} else {
			res.Passed, res.Error = builtin(cs.Name, k)
		}
		out = append(out, res)
	}
	if c.spec.Judge != nil {
		out = append(out, c.runJudge(ctx, k))
	}
	return out
}

func evalCheck(ctx context.Context, prg cel.Program, act map[string]any) (bool, string) {
	v, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		return false, "evaluate: " + err.Error()
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, "the expression gave " + v.Type().TypeName() + ", not a bool"
	}
	return bool(b), ""
}

// activation is the case as CEL values: plain JSON-decoded maps and lists.
func (k Case) activation() (map[string]any, error) {
	act := map[string]any{"expected": nil}
	for name, v := range map[string]any{"original": k.Original, "replay": k.Replay} {
		var m map[string]any
		if err := roundTrip(v, &m); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", name, err)
		}
		act[name] = m
	}
	if k.Expected != nil {
		var m map[string]any
		if err := roundTrip(k.Expected, &m); err != nil {
			return nil, fmt.Errorf("prepare expected: %w", err)
		}
		if _, ok := m["outcome"]; !ok {
			m["outcome"] = nil
		}
		if _, ok := m["output"]; !ok {
			m["output"] = nil
		}
		act["expected"] = m
	}
	return act, nil
}

func roundTrip(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// builtin runs a built-in check.
func builtin(name string, k Case) (bool, string) {
	switch name {
	case CheckOutcomeUnchanged:
		return k.Original.Outcome == k.Replay.Outcome, ""
	case CheckOutputUnchanged:
		return sameJSON(k.Original.Output, k.Replay.Output), ""
	case CheckSameToolCalls:
		a, b := k.Original.ToolCalls, k.Replay.ToolCalls
		if len(a) != len(b) {
			return false, ""
		}
		for i := range a {
			if a[i].Tool != b[i].Tool || a[i].Operation != b[i].Operation {
				return false, ""
			}
			if !sameJSON(a[i].Args, b[i].Args) {
				return false, ""
			}
		}
		return true, ""
	case CheckExpectedOutcome:
		if k.Expected == nil || k.Expected.Outcome == "" {
			return true, ""
		}
		return k.Expected.Outcome == k.Replay.Outcome, ""
	}
	return false, "no built-in check " + name
}

// Tally counts a batch's check results into totals, in the spec's order,
// with each gated check's minimum.
func (s Spec) Tally(counts map[string][3]int) []CheckTotal {
	out := make([]CheckTotal, 0, len(s.Checks)+1)
	for _, name := range s.Names() {
		n := counts[name]
		t := CheckTotal{Name: name, Passed: n[0], Failed: n[1], Errored: n[2]}
		if all := n[0] + n[1] + n[2]; all > 0 {
			t.PassRate = float64(n[0]) / float64(all)
		}
		if g, ok := s.Gate[name]; ok {
			t.Gate = &g
		}
		out = append(out, t)
	}
	return out
}

// Verdict is failed when a gated check's pass rate is under its minimum
// or, without a gate, when any check failed or errored; a batch that did
// not complete fails too: a gate passes on every workflow or none.
func Verdict(status string, s Spec, totals []CheckTotal) string {
	if status == BatchFailed || status == BatchCancelled {
		return VerdictFailed
	}
	for _, t := range totals {
		if len(s.Gate) > 0 {
			if t.Gate != nil && t.PassRate < *t.Gate {
				return VerdictFailed
			}
		} else if t.Failed+t.Errored > 0 {
			return VerdictFailed
		}
	}
	return VerdictPassed
}

// EncodeBatchChecks is what the stores keep of a new batch's checks: its
// spec as JSON, and the expectation of each workflow, in order, as JSON or
// "" when it has none.
func EncodeBatchChecks(b *Batch, workflowIDs []string) (spec string, expected []string, err error) {
	raw, err := json.Marshal(b.Spec)
	if err != nil {
		return "", nil, fmt.Errorf("encode replay batch checks: %w", err)
	}
	expected = make([]string, len(workflowIDs))
	for i, id := range workflowIDs {
		e, ok := b.Expectations[id]
		if !ok {
			continue
		}
		raw, err := json.Marshal(e)
		if err != nil {
			return "", nil, fmt.Errorf("encode the expectation of %s: %w", id, err)
		}
		expected[i] = string(raw)
	}
	return string(raw), expected, nil
}

// DecodeExpectation reads an expectation EncodeBatchChecks or a dataset
// store wrote; nil for "".
func DecodeExpectation(s string) (*Expectation, error) {
	if s == "" {
		return nil, nil
	}
	var e Expectation
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return nil, fmt.Errorf("decode expectation: %w", err)
	}
	return &e, nil
}

// CaseOf is the case of a replay of wf: both sides from the replay's
// aligned steps, with the dataset's expectation when there is one.
func CaseOf(wf *workflow.Workflow, rp *Replay, expected *Expectation) Case {
	k := Case{Tenant: rp.Tenant, Expected: expected,
		Original: Side{Outcome: wf.Outcome, Output: wf.Output, Status: wf.Status, Steps: []StepView{}, ToolCalls: []CallView{}},
		Replay: Side{Outcome: rp.ReplayOutcome, Output: rp.ReplayOutput, Status: rp.ReplayStatus, Steps: []StepView{},
			ToolCalls: []CallView{}},
	}
	if rp.Usage != (Usages{}) {
		orig, repl := rp.Usage.Original, rp.Usage.Replay
		k.Original.Usage, k.Replay.Usage = &orig, &repl
	}
	for _, e := range rp.Steps {
		if e.Original != nil {
			k.Original.add(e.Original)
		}
		if e.Replay != nil {
			k.Replay.add(e.Replay)
		}
	}
	return k
}

func (s *Side) add(st *workflow.Step) {
	s.Steps = append(s.Steps, StepView{Step: st.Step, Action: st.Action, Kind: st.Kind, Status: st.Status, Tool: st.Tool,
		Operation: st.Operation, Args: st.Args, Outcome: st.Outcome, Result: st.Result})
	if st.Operation != "" {
		args := st.Args
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		s.ToolCalls = append(s.ToolCalls, CallView{Tool: st.Tool, Operation: st.Operation, Args: args, Status: st.Status})
	}
}

// Results of a check as the stores count them.
const (
	ResultPassed  = "passed"
	ResultFailed  = "failed"
	ResultErrored = "errored"
)

// Result is passed, failed or errored.
func (c CheckResult) Result() string {
	switch {
	case c.Error != "":
		return ResultErrored
	case c.Passed:
		return ResultPassed
	}
	return ResultFailed
}

// FailedChecks counts the replay's checks that failed or errored.
func (r *Replay) FailedChecks() int {
	n := 0
	for _, c := range r.Checks {
		if c.Result() != ResultPassed {
			n++
		}
	}
	return n
}

// CheckCount counts a batch's results of one check that ended one way.
type CheckCount struct {
	Name, Result string
	Count        int
}

// CountChecks sets the batch's check totals from the stores' counts, and
// its verdict once it has ended.
func (b *Batch) CountChecks(counts []CheckCount) {
	b.Checks, b.Verdict = nil, ""
	if b.Spec.Empty() {
		return
	}
	byName := map[string][3]int{}
	for _, c := range counts {
		n := byName[c.Name]
		switch c.Result {
		case ResultPassed:
			n[0] += c.Count
		case ResultFailed:
			n[1] += c.Count
		default:
			n[2] += c.Count
		}
		byName[c.Name] = n
	}
	b.Checks = b.Spec.Tally(byName)
	if b.Status != BatchRunning {
		b.Verdict = Verdict(b.Status, b.Spec, b.Checks)
	}
}
