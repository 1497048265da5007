package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
)

// Definition is an agent version's definition as deployed. Its JSON shape is
// SPEC §4's YAML converted to JSON:
//
//	{
//	  "purpose":  "Triage card transactions for fraud",   // optional; the plan step's system prompt
//	  "tools":    ["payments", "cases"],
//	  "inputs":   {"type": "object", ...},                 // JSON Schema of `context`
//	  "policies": {"financial": {"allow": "<CEL bool>"}},
//	  "steps":    [ <Step>, ... ],
//	  "outcome":  "<CEL string>",                          // optional; default "completed"
//	  "output":   "<CEL>",                                 // optional
//	  "max_steps": 1000                                    // optional guard against goto loops
//	}
//
// Every expression is a CEL string. Its variables are `goal` (string),
// `context` (map), `caller` (map: `sub`, `tenant`, `scopes`), `steps` (the
// names saved so far) and every name a step saves, which is null until a
// step sets it; a policy rule also sees `tool`, `operation` and `args`.
type Definition struct {
	Purpose string `json:"purpose,omitempty"`
	// Model names the registered model plan steps use unless they name
	// their own ("default": the server-wide one).
	Model string `json:"model,omitempty"`
	// Instructions is a CEL string: the system message of every plan step.
	Instructions string            `json:"instructions,omitempty"`
	Limits       *Limits           `json:"limits,omitempty"`
	Tools        []string          `json:"tools"`
	Inputs       json.RawMessage   `json:"inputs,omitempty"`
	Policies     map[string]Policy `json:"policies,omitempty"`
	Steps        []Step            `json:"steps"`
	Outcome      string            `json:"outcome,omitempty"`
	Output       string            `json:"output,omitempty"`
	MaxSteps     int               `json:"max_steps,omitempty"`
	// A2A sets how the version is served over A2A (docs/a2a.md).
	A2A *A2AOptions `json:"a2a,omitempty"`
}

// A2AOptions are a version's A2A settings.
type A2AOptions struct {
	// PublicCard serves the agent card without a bearer token.
	PublicCard bool `json:"public_card,omitempty"`
}

// Limits bound every run of a version unless the invocation says otherwise.
type Limits struct {
	// MaxLLMTokens bounds a run's tokens over all its completions.
	MaxLLMTokens int64 `json:"max_llm_tokens,omitempty"`
	// OnExhausted is what a run does when max_llm_tokens or max_tool_calls
	// is spent: OnExhaustedFail (the default) ends it limit_exceeded,
	// OnExhaustedAsk has it wait for a person's approval of more.
	OnExhausted string `json:"on_exhausted,omitempty"`
	// Ask configures the approval a spent budget asks for.
	Ask *BudgetAsk `json:"ask,omitempty"`
}

// Models lists the models the definition names, the agent's first, each once.
func (d Definition) Models() []string {
	var out []string
	add := func(name string) {
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	add(d.Model)
	for _, s := range d.Steps {
		if s.Plan != nil {
			add(s.Plan.Model)
		}
	}
	return out
}

// Policy is the rule of one policy class: the call is allowed when Allow
// evaluates to true; false, an error or a non-bool result denies it.
type Policy struct {
	Allow string `json:"allow"`
}

// Step is one step of a definition. It has a required `action` (a slug
// naming the step in events and goto targets), an optional `when` (CEL bool;
// false skips the step) and exactly one kind:
//
//	{"action": "fetch", "call": "payments.getTransaction",
//	 "args": {"id": "context.transaction_id"}, "save_as": "txn"}
//	{"action": "fraud_score", "score": "txn.amount > 1000.0 ? 0.91 : 0.12"}   // saves `score`
//	{"action": "route_queue", "route": [{"when": "score >= 0.8", "queue": "fraud-review"},
//	                                    {"queue": "standard"}]}               // saves `queue`
//	{"action": "remember", "set": {"attempts": "attempts == null ? 1 : attempts + 1"}}
//	{"action": "retry", "when": "attempts < 3", "goto": "fetch"}
//	{"action": "investigate", "plan": {"prompt": "'Find related transactions'", "max_calls": 5}}
//	{"action": "done", "finish": "cleared"}                                   // a slug literal
//	{"action": "done", "finish": {"outcome": "queue == 'x' ? 'a' : 'b'"}}     // a CEL string
//	{"action": "refund_approval", "approve": {"when": "txn.amount > 500.0",
//	 "reason": "'Refund of ' + string(txn.amount)", "approver_scope": "approve:refunds",
//	 "timeout": "24h", "on_timeout": "deny"}}                                   // a person decides
//
// In `args` and `set`, a string value is a CEL expression (write a string
// literal as "'text'"), a number, bool or null is taken literally (a number
// as expressions read one from JSON: a double, but an integer past 2^53 an
// int with every digit), and objects and arrays nest; `args` may also be one CEL expression that gives
// the whole object, e.g. "context.args". `route` queues are literal names; the first case
// whose `when` holds wins and only the last case may omit `when`. `save_as`
// names what call (its decoded JSON result), score, route and plan (the
// model's final answer) save; score and route default to `score` and
// `queue`. `on_denied: continue` lets the workflow go on after a call the
// scope or policy check refused, and `on_error: continue` after a call whose
// result status is `error`; by default they end it with outcome `denied` and
// `failed`.
type Step struct {
	Action   string         `json:"action"`
	When     string         `json:"when,omitempty"`
	Call     string         `json:"call,omitempty"`
	Args     any            `json:"args,omitempty"`
	SaveAs   string         `json:"save_as,omitempty"`
	Score    string         `json:"score,omitempty"`
	Route    []RouteCase    `json:"route,omitempty"`
	Set      map[string]any `json:"set,omitempty"`
	Goto     string         `json:"goto,omitempty"`
	Plan     *Plan          `json:"plan,omitempty"`
	Finish   *Finish        `json:"finish,omitempty"`
	Approve  *Approve       `json:"approve,omitempty"`
	OnDenied string         `json:"on_denied,omitempty"`
	OnError  string         `json:"on_error,omitempty"`
}

// Approve pauses the workflow until a person decides (SPEC §4 Approvals).
type Approve struct {
	// When is a CEL bool: the step asks for a decision only when it holds
	// (default: always); when false the workflow goes on at once and the
	// step emits nothing, as a step whose own when is false.
	When string `json:"when,omitempty"`
	// Reason is a CEL string shown to the approvers.
	Reason string `json:"reason,omitempty"`
	// ApproverScope is a scope the approver's token must carry besides
	// workflows:approve.
	ApproverScope string `json:"approver_scope,omitempty"`
	// Timeout is a Go duration ("30m", "24h"; default 24h, at most 30 days)
	// after which OnTimeout applies.
	Timeout string `json:"timeout,omitempty"`
	// OnTimeout is "deny" (default) or "approve".
	OnTimeout string `json:"on_timeout,omitempty"`
	// AllowSelf lets the invoker decide their own workflow.
	AllowSelf bool `json:"allow_self,omitempty"`
}

// RouteCase is one case of a route step.
type RouteCase struct {
	When  string `json:"when,omitempty"`
	Queue string `json:"queue"`
}

// Plan lets an LLM choose tool calls among the agent's operations.
type Plan struct {
	// Prompt is a CEL string appended to the goal and context in the user message.
	Prompt string `json:"prompt"`
	// MaxCalls bounds the tool calls the model may ask for (default 10, at most 100).
	MaxCalls int `json:"max_calls,omitempty"`
	// Operations narrows what the model is offered: "<tool>" for all of a
	// tool's operations or "<tool>.<operation id>"; default all of them.
	Operations []string `json:"operations,omitempty"`
	// MaxFunctions is how many operations one completion is offered (default
	// 64, at most 128): with more, the best matches of the goal and the
	// conversation so far are offered.
	MaxFunctions int `json:"max_functions,omitempty"`
	// Model overrides the agent's model for this step.
	Model string `json:"model,omitempty"`
	// SaveAs names the model's final answer (the step's save_as also does).
	SaveAs string `json:"save_as,omitempty"`
	// OutputSchema is a JSON Schema the final answer must be an object of.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Temperature (0..2) and MaxOutputTokens are passed to the model.
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxOutputTokens int64    `json:"max_output_tokens,omitempty"`
}

// Finish ends the run with an outcome. In JSON it is either a bare string,
// taken literally and required to be a slug, or {"outcome": "<CEL string>"}.
type Finish struct {
	Outcome string `json:"outcome"`
	// Literal reports that Outcome is a slug rather than an expression.
	Literal bool `json:"-"`
}

// UnmarshalJSON accepts both forms of finish.
func (f *Finish) UnmarshalJSON(data []byte) error {
	if s := bytes.TrimSpace(data); len(s) > 0 && s[0] == '"' {
		f.Literal = true
		return json.Unmarshal(s, &f.Outcome)
	}
	type plain Finish
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("finish must be a slug or {\"outcome\": \"<CEL>\"}: %w", err)
	}
	*f = Finish(p)
	f.Literal = false
	return nil
}

// MarshalJSON writes finish back in the form it was given.
func (f Finish) MarshalJSON() ([]byte, error) {
	if f.Literal {
		return json.Marshal(f.Outcome)
	}
	return json.Marshal(struct {
		Outcome string `json:"outcome"`
	}{f.Outcome})
}

// DecodeDefinition decodes a definition strictly: unknown members and wrong
// types are refused with a field error naming "definition". The numbers of
// untyped values (a step's args and set) are json.Numbers, so an integer
// written past 2^53 keeps every digit (compileTree reads them).
func DecodeDefinition(data []byte) (Definition, []problem.FieldError) {
	var def Definition
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&def); err != nil {
		return Definition{}, []problem.FieldError{locateDecodeError(data, err)}
	}
	if dec.More() {
		return Definition{}, []problem.FieldError{{Message: "trailing data after the definition"}}
	}
	return def, nil
}

// locateDecodeError says where a definition that does not decode is wrong,
// relative to the definition ("" is the definition itself). A step's
// problem names the step ("steps[1].savee_as", "step 2 (fetch): unknown
// field …"), which the decoder alone does not.
func locateDecodeError(data []byte, err error) problem.FieldError {
	var loose struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if json.Unmarshal(data, &loose) == nil {
		for i, raw := range loose.Steps {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			var s Step
			serr := dec.Decode(&s)
			if serr == nil {
				continue
			}
			var named struct {
				Action string `json:"action"`
			}
			_ = json.Unmarshal(raw, &named)
			field, msg := describeDecodeError(serr)
			path := fmt.Sprintf("steps[%d]", i)
			if field != "" {
				path += "." + field
			}
			return problem.FieldError{Field: path, Message: stepName(i, named.Action) + ": " + msg}
		}
	}
	field, msg := describeDecodeError(err)
	return problem.FieldError{Field: field, Message: msg}
}

// describeDecodeError is the field a decoding error is about (a dotted
// path, "" when it does not say) and what is wrong, without "json: ".
func describeDecodeError(err error) (field, msg string) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field, fmt.Sprintf("expected %s, got JSON %s", te.Type, te.Value)
	}
	msg = strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		if f, err := strconv.Unquote(name); err == nil {
			return f, "unknown field " + name
		}
	}
	return "", msg
}
