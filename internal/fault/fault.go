// Package fault injects failures into replays (SPEC §4 "Change safety",
// fault injection): a replay's faults answer the tool calls they match
// with an injected status and body, or a time-out or a transport error,
// instead of the recorded (or real) answer, and the call is never sent.
// The target version then handles the failure as it would in production
// (its branches, its retries, its model's reaction), and that is what the
// replay records and its checks score.
//
// Whether a fault with a rate applies to a call is a function of the
// replayed workflow's id, the call's step and the fault's index (Chance),
// so a batch run twice injects into the same calls.
package fault

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// Limits of a request's faults.
const (
	MaxFaults  = 32
	MaxBody    = 64 << 10
	MaxHeaders = 32
)

// Injected errors: the call timed out, or the API could not be reached.
const (
	ErrorTimeout   = "timeout"
	ErrorTransport = "transport"
)

// Fault is one fault a replay injects: into the calls of Tool (and of
// Operation, when set) whose arguments satisfy When, at Rate (all of
// them when unset).
type Fault struct {
	Tool      string `json:"tool"`
	Operation string `json:"operation,omitempty"`
	// When is a CEL bool over tool, operation and args.
	When string `json:"when,omitempty"`
	// Rate is the share of matching calls injected, 0..1 (default 1).
	Rate   *float64 `json:"rate,omitempty"`
	Result Result   `json:"result"`
}

// Result is the injected answer: an HTTP status with an optional body and
// headers, or an error (ErrorTimeout, ErrorTransport), exactly one.
type Result struct {
	Status  int               `json:"status,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Error   string            `json:"error,omitempty"`
}

// Injected is what a step records of the fault that answered its call:
// the fault's index in the request's faults, and its status or error.
type Injected struct {
	Fault  int    `json:"fault"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Tools looks up the tools and operations faults name (the tool store).
type Tools interface {
	ToolByName(ctx context.Context, tenant, name string) (*tool.Tool, error)
	Operation(ctx context.Context, tenant, toolID, opID string) (*tool.Operation, error)
}

// Plan is a request's faults compiled for the replay of one workflow.
type Plan struct {
	// seed is the replayed workflow's id.
	seed   string
	faults []Fault
	when   []*agent.CallCondition
}

// Compile checks faults as far as they can be without the tenant's tools
// and compiles them for the replay of the workflow seed; field is the
// request's name for the list ("faults"). No faults is a nil plan, which
// injects nothing.
func Compile(field, seed string, faults []Fault) (*Plan, []problem.FieldError) {
	if len(faults) == 0 {
		return nil, nil
	}
	var errs []problem.FieldError
	bad := func(f, format string, args ...any) {
		errs = append(errs, problem.FieldError{Field: f, Message: fmt.Sprintf(format, args...)})
	}
	if len(faults) > MaxFaults {
		bad(field, "lists %d faults, over the limit of %d", len(faults), MaxFaults)
		return nil, errs
	}
	p := &Plan{seed: seed, faults: faults, when: make([]*agent.CallCondition, len(faults))}
	for i, f := range faults {
		at := field + "[" + strconv.Itoa(i) + "]"
		if f.Tool == "" {
			bad(at+".tool", "is required: the name of a registered tool, e.g. \"payments\"")
		}
		if f.Rate != nil && (math.IsNaN(*f.Rate) || *f.Rate < 0 || *f.Rate > 1) {
			bad(at+".rate", "must be from 0 to 1 (the share of matching calls that get the fault; leave it out for all of them)")
		}
		if f.When != "" {
			c, msg := condition(f.When)
			if msg != "" {
				bad(at+".when", "%s (a CEL bool over tool, operation and args, e.g. \"args.amount > 100\")", msg)
			}
			p.when[i] = c
		}
		errs = append(errs, checkResult(at+".result", f.Result)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// headerNameRE is an HTTP header name: one RFC 9110 token.
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// conditions are compiled whens by their source: a batch compiles its
// faults for each of its replays, and compiling CEL (about 0.2 ms) costs
// more than a replay served from the record.
var conditions, _ = lru.New[string, *agent.CallCondition](256)

// condition compiles a when, or finds it compiled.
func condition(src string) (*agent.CallCondition, string) {
	if c, ok := conditions.Get(src); ok {
		return c, ""
	}
	c, msg := agent.CompileCallCondition(src)
	if msg == "" {
		conditions.Add(src, c)
	}
	return c, msg
}

// checkResult checks an injected answer.
func checkResult(at string, r Result) []problem.FieldError {
	var errs []problem.FieldError
	bad := func(f, msg string) { errs = append(errs, problem.FieldError{Field: f, Message: msg}) }
	switch {
	case r.Status == 0 && r.Error == "":
		bad(at, "needs a status (e.g. {\"status\": 503}) or an error (timeout or transport)")
		return errs
	case r.Status != 0 && r.Error != "":
		bad(at, "gives both a status and an error: an injected answer is one or the other")
		return errs
	case r.Error != "":
		if r.Error != ErrorTimeout && r.Error != ErrorTransport {
			bad(at+".error", strconv.Quote(r.Error)+" is not timeout (the call ran out of time) or transport (the API could not be reached)")
		}
		if len(r.Body) > 0 || len(r.Headers) > 0 {
			bad(at+".error", "an injected error has no body or headers: no answer arrived")
		}
		return errs
	}
	if r.Status < 100 || r.Status > 599 {
		bad(at+".status", fmt.Sprintf("%d is not an HTTP status: give one from 100 to 599", r.Status))
	}
	if len(r.Body) > MaxBody {
		bad(at+".body", fmt.Sprintf("is %d bytes, over the limit of %d", len(r.Body), MaxBody))
	} else if len(r.Body) > 0 && !json.Valid(r.Body) {
		bad(at+".body", "is not JSON")
	}
	if len(r.Headers) > MaxHeaders {
		bad(at+".headers", fmt.Sprintf("lists %d headers, over the limit of %d", len(r.Headers), MaxHeaders))
	}
	for name, v := range r.Headers {
		if !headerNameRE.MatchString(name) || strings.ContainsFunc(v, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) {
			bad(at+".headers", fmt.Sprintf("%q: %q is not a valid HTTP header", name, v))
		}
	}
	return errs
}

// Check is Compile's checks and, when they pass, those of the tenant's
// tools: each fault's tool must be registered and its operation, when
// given, be one of that tool's. Errors other than a field's are the
// store's.
func Check(ctx context.Context, tools Tools, tenant, field string, faults []Fault) ([]problem.FieldError, error) {
	if _, errs := Compile(field, "", faults); len(errs) > 0 {
		return errs, nil
	}
	var errs []problem.FieldError
	for i, f := range faults {
		at := field + "[" + strconv.Itoa(i) + "]"
		t, err := tools.ToolByName(ctx, tenant, f.Tool)
		if problem.Is(err, problem.NotFound) {
			errs = append(errs, problem.FieldError{Field: at + ".tool", Message: fmt.Sprintf("no tool named %q in this tenant: name a registered tool (GET /v1/tools)", f.Tool)})
			continue
		}
		if err != nil {
			return nil, err
		}
		if f.Operation == "" {
			continue
		}
		if _, err := tools.Operation(ctx, tenant, t.ID, f.Operation); problem.Is(err, problem.NotFound) {
			errs = append(errs, problem.FieldError{Field: at + ".operation", Message: fmt.Sprintf("tool %s has no operation %q: name one of its operations (GET /v1/tools/%s/operations), or leave it out for all of them", f.Tool, f.Operation, f.Tool)})
		} else if err != nil {
			return nil, err
		}
	}
	return errs, nil
}

// Chance is the number in [0, 1) that decides whether the fault at index
// applies to the call at step of the replay of the workflow seed: the
// first 8 bytes of SHA-256("<seed>/<step>/<index>") as a big-endian
// integer over 2^64. A fault with rate r applies when Chance < r.
func Chance(seed string, step, index int) float64 {
	sum := sha256.Sum256([]byte(seed + "/" + strconv.Itoa(step) + "/" + strconv.Itoa(index)))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// Injection is a fault's answer to one call.
type Injection struct {
	Injected
	result Result
}

// Inject finds the first fault that applies to the call at step: its
// tool, its operation, its when and its rate. nil when none does (and
// for a nil plan). A when that cannot be evaluated for the call (a
// missing argument, a wrong type) does not apply.
func (p *Plan) Inject(ctx context.Context, step int, toolName, opID string, args map[string]any) *Injection {
	if p == nil {
		return nil
	}
	for i, f := range p.faults {
		if f.Tool != toolName || (f.Operation != "" && f.Operation != opID) {
			continue
		}
		if c := p.when[i]; c != nil {
			if ok, err := c.Holds(ctx, toolName, opID, args); err != nil || !ok {
				continue
			}
		}
		if f.Rate != nil && Chance(p.seed, step, i) >= *f.Rate {
			continue
		}
		return &Injection{Injected: Injected{Fault: i, Status: f.Result.Status, Error: f.Result.Error}, result: f.Result}
	}
	return nil
}

// CallResult is the injection as the call's result, as a real answer of
// its kind would be: a 2xx status is ok with the body; any other status,
// a time-out or a transport error is an error, with the error code and
// message a real call's failure has, marked as injected.
func (in *Injection) CallResult() agent.CallResult {
	const mark = " (a fault injected by the replay; the call was not sent)"
	r := in.result
	switch r.Error {
	case ErrorTimeout:
		return agent.CallResult{Status: agent.StatusError, Err: "the call timed out" + mark, ErrorCode: tool.CodeTimeout}
	case ErrorTransport:
		return agent.CallResult{Status: agent.StatusError, Err: "the API could not be reached" + mark, ErrorCode: tool.CodeTransport}
	}
	var body json.RawMessage
	if len(r.Body) > 0 {
		body = r.Body
	}
	if r.Status >= 200 && r.Status <= 299 {
		return agent.CallResult{Status: agent.StatusOK, Result: body}
	}
	code := tool.CodeUpstream
	if r.Status == http.StatusTooManyRequests {
		code = tool.CodeRateLimited
	}
	text := strconv.Itoa(r.Status)
	if t := http.StatusText(r.Status); t != "" {
		text += " " + t
	}
	return agent.CallResult{Status: agent.StatusError, Result: body, Err: "the API answered " + text + mark, ErrorCode: code}
}
