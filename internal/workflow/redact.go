package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

// Redaction (SPEC §4 "Data lifecycle and governance"): the program and
// the live calls see real values; what a workflow stores (its steps, its
// completions, its output, its audit details) and what reports on it
// (spans) hold the masked forms. A workflow masks by the tools as it
// started: a tool updated meanwhile masks later workflows only.

// masking sets up e's masker: the tenant's key, and the detectors of text
// that no one tool owns (the operator's and every tool's of the program).
func (e *recorder) masking(ctx context.Context) error {
	if !e.masks() {
		return nil // nothing to mask: no masker (nil masks nothing), no key
	}
	m, err := e.r.opts.Redact.Masker(ctx, e.wf.Tenant)
	if err != nil {
		return err
	}
	e.mask = m
	var lists [][]string
	for _, t := range e.tools {
		if t.Redact != nil {
			lists = append(lists, t.Redact.Detect)
		}
	}
	e.detect = m.Detectors(lists...)
	return nil
}

// masks reports whether the operator or a tool of the program asks for
// redaction at all.
func (e *recorder) masks() bool {
	if e.r.opts.Redact == nil {
		return false
	}
	if len(e.r.opts.Redact.Detect) > 0 {
		return true
	}
	for _, t := range e.tools {
		if !t.Redact.IsZero() {
			return true
		}
	}
	return false
}

// redaction is the tool's redaction and the detectors for its calls.
func (e *recorder) redaction(toolName string) (fields, headers, detect []string) {
	t := e.tools[toolName]
	if t == nil || t.Redact == nil {
		return nil, nil, e.mask.Detectors()
	}
	return t.Redact.Fields, t.Redact.Headers, e.mask.Detectors(t.Redact.Detect)
}

// maskArgs masks a call's arguments as its step keeps them.
func (e *recorder) maskArgs(toolName string, args map[string]any) json.RawMessage {
	if args == nil {
		return nil
	}
	raw, _ := json.Marshal(args)
	fields, _, detect := e.redaction(toolName)
	return e.mask.JSON(raw, redact.RootArguments, fields, detect)
}

// maskCall masks what a call of args sent and received, as its step
// keeps it: first where the call put the arguments its tool's fields
// name, whatever their length, then the rest; the values masked are
// masked wherever they appear later.
func (e *recorder) maskCall(toolName string, args map[string]any, res tool.CallResult) tool.CallResult {
	if e.mask == nil {
		return res
	}
	fields, headers, detect := e.redaction(toolName)
	req := res.Request
	req.Header = maps.Clone(req.Header)
	for k, v := range req.Header {
		req.Header[k] = append([]string(nil), v...)
	}
	placed := redact.Request{URL: req.URL, Header: req.Header, Body: req.Body}
	e.mask.Placed(&placed, req.Places, fields, args)
	req.URL, req.Body = placed.URL, placed.Body
	e.mask.Headers(req.Header, headers, detect)
	req.Body = e.mask.JSON(req.Body, redact.RootRequest, fields, detect)
	res.Body = e.mask.JSON(res.Body, redact.RootResponse, fields, detect)
	req.URL = e.mask.URL(req.URL, detect)
	res.Request = req
	return res
}

// maskStep masks a step and its audit records before they are stored.
func (e *recorder) maskStep(s *Step, ev agent.Event, recs []*audit.Record) {
	if e.mask == nil {
		return
	}
	detect := e.detect
	var fields []string
	if ev.Tool != "" {
		fields, _, detect = e.redaction(ev.Tool)
		detect = e.mask.Detectors(detect, e.detect)
	}
	s.Args = e.maskArgs(ev.Tool, ev.Args)
	s.Result = e.mask.JSON(ev.Result, redact.RootResponse, fields, detect)
	s.Error = e.mask.Text(s.Error, detect)
	s.Reason = e.mask.Text(s.Reason, detect)
	for _, r := range recs {
		r.Details = e.mask.JSON(r.Details, "", nil, detect)
	}
}

// maskText masks text no one tool owns: an output, an error, a reason.
func (e *recorder) maskText(s string) string { return e.mask.Text(s, e.detect) }

// maskJSON masks a JSON document no one tool owns.
func (e *recorder) maskJSON(raw json.RawMessage) json.RawMessage {
	return e.mask.JSON(raw, "", nil, e.detect)
}

// RequestHash is the hash a completion is recorded under: that of the
// request as masked by m (agent.ChatRequest.Hash when m is nil), so a
// request made again from masked answers finds its record.
func RequestHash(m *redact.Masker, detect []string, req agent.ChatRequest) (string, error) {
	if m == nil {
		return req.Hash()
	}
	hash, _, err := hashRequest(m, detect, req)
	return hash, err
}

// hashRequest is RequestHash, with the request's JSON it hashed (before
// masking), for a record that holds it.
func hashRequest(m *redact.Masker, detect []string, req agent.ChatRequest) (string, json.RawMessage, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return "", nil, fmt.Errorf("marshal chat request: %w", err)
	}
	if m == nil {
		hash, err := req.Hash() // canonical without parsing raw again
		return hash, raw, err
	}
	canon, err := agent.CanonicalJSON(m.JSON(raw, "", nil, detect))
	if err != nil {
		return "", nil, fmt.Errorf("canonicalize chat request: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), raw, nil
}

// maskResult masks a run's output and error before its end is stored
// (and sent on, in webhook bodies).
func (e *recorder) maskResult(res agent.Result) agent.Result {
	if e.mask == nil {
		return res
	}
	if res.Output != nil {
		if raw, err := json.Marshal(res.Output); err == nil {
			if v, ok := redact.Decode(e.maskJSON(raw)); ok {
				res.Output = v
			}
		}
	}
	res.Error = e.maskText(res.Error)
	return res
}

// Masking masks calls and completion requests of a tenant's replay the
// way a workflow calling tools masked them before storing (see
// replay.Masking); tools are the names of the tools the history called,
// at their current revision.
func (r *Runner) Masking(ctx context.Context, tenant string, tools []string) (*ReplayMasking, error) {
	e := &recorder{r: r, wf: &Workflow{Tenant: tenant}, tools: map[string]*tool.Tool{}}
	for _, name := range tools {
		t, err := r.opts.Tools.ToolByName(ctx, tenant, name)
		switch {
		case err == nil:
			e.tools[name] = t
		case !problem.Is(err, problem.NotFound):
			return nil, fmt.Errorf("tool %s: %w", name, err)
		}
	}
	if err := e.masking(ctx); err != nil {
		return nil, fmt.Errorf("redaction key: %w", err)
	}
	return &ReplayMasking{e: e}, nil
}

// ReplayMasking is what Runner.Masking returns.
type ReplayMasking struct{ e *recorder }

// Args returns args masked as a call of toolName stores them.
func (m *ReplayMasking) Args(toolName string, args map[string]any) map[string]any {
	if m.e.mask == nil {
		return args
	}
	v, ok := redact.Decode(m.e.maskArgs(toolName, args))
	if out, isMap := v.(map[string]any); ok && isMap {
		return out
	}
	return args
}

// RequestHash is the hash a completion of req is recorded under.
func (m *ReplayMasking) RequestHash(req agent.ChatRequest) (string, error) {
	return RequestHash(m.e.mask, m.e.detect, req)
}
