package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/workflow"
)

const (
	// keyMeta is the _meta entry of a call's idempotency key; the
	// Idempotency-Key header of the POST that carries the call is the same.
	keyMeta = "io.agentplane/idempotency-key"
	// replayedMeta marks the result of a call that attached to the
	// workflow its key had made.
	replayedMeta = "io.agentplane/idempotent-replayed"
	// maxKey bounds the length of an idempotency key, as the API's.
	maxKey = 255
	// keyPath scopes the keys of MCP calls, as a path scopes an invoke's.
	keyPath = "/mcp"
)

var tracer = telemetry.Tracer("github.com/agentplane/agentplane/internal/mcp")

// startSpan starts the call's span, a child of the trace context the client
// put in _meta (W3C traceparent and tracestate) when it did.
func startSpan(ctx context.Context, req *sdk.CallToolRequest) (context.Context, trace.Span) {
	carrier := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := req.Params.Meta[k].(string); ok {
			carrier[k] = v
		}
	}
	if len(carrier) > 0 {
		ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	return tracer.Start(ctx, "mcp tools/call "+req.Params.Name, trace.WithSpanKind(trace.SpanKindServer))
}

// invoked is the workflow a call ran, once it has finished (or waits for
// an approval).
type invoked struct {
	wf    *workflow.Workflow
	steps []workflow.Step
	// repeat: the call's key had made the workflow already.
	repeat bool
}

// result is the call's result, marked in _meta when the call was a repeat.
func (iv invoked) result(res *sdk.CallToolResult, err error) (*sdk.CallToolResult, error) {
	if err == nil && iv.repeat {
		if res.Meta == nil {
			res.Meta = sdk.Meta{}
		}
		res.Meta[replayedMeta] = true
	}
	return res, err
}

// run invokes the workflow of a call, or attaches to the one the call's
// idempotency key made, and waits until it has finished (or waits for an
// approval).
func (s *Server) run(ctx context.Context, r *http.Request, req *sdk.CallToolRequest, sr workflow.StartRequest) (invoked, error) {
	started, err := s.start(ctx, r, req, sr)
	if err != nil {
		return invoked{}, err
	}
	wf, steps, err := s.svc.Runner.Finished(ctx, frontdoor.Principal(r).Tenant, started.Workflow.ID)
	if err != nil {
		return invoked{}, err
	}
	return invoked{wf: wf, steps: steps, repeat: started.Repeat}, nil
}

// start invokes the workflow of a call, or attaches to the one the call's
// idempotency key made, and returns once it is stored.
func (s *Server) start(ctx context.Context, r *http.Request, req *sdk.CallToolRequest, sr workflow.StartRequest) (workflow.Invoked, error) {
	p, info := frontdoor.Principal(r), frontdoor.InfoFrom(r.Context())
	key, err := callKey(r, req)
	if err != nil {
		return workflow.Invoked{}, err
	}
	if key != "" {
		sr.IdempotencyKey, sr.RequestHash = key, fingerprint(req)
	}
	sr.Tenant = p.Tenant
	sr.Caller = workflow.Caller{Sub: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes}
	sr.RequestID = info.RequestID
	sr.TraceID = info.TraceID
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		sr.TraceID = sc.TraceID().String()
	}
	started, err := s.svc.Invoker.Invoke(ctx, workflow.Invocation{StartRequest: sr, TTL: s.cfg.KeyTTL})
	if errors.Is(err, workflow.ErrKeyReused) {
		return workflow.Invoked{}, problem.New(problem.IdempotencyKeyReused,
			"this idempotency key was used with another call (a different tool or arguments); use a new key for a new call")
	}
	if err != nil {
		return workflow.Invoked{}, err
	}
	if started.Repeat {
		info.AddDetail("idempotent_replayed", true)
	}
	return started, nil
}

// callKey is the stored form of a call's idempotency key, from its _meta or
// the Idempotency-Key header of the POST that carries it, scoped to the
// caller and to /mcp; "" when the call has none.
func callKey(r *http.Request, req *sdk.CallToolRequest) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if v, ok := req.Params.Meta[keyMeta]; ok {
		meta, ok := v.(string)
		switch {
		case !ok:
			return "", problem.New(problem.MalformedRequest, "_meta %s must be a string", keyMeta)
		case key != "" && meta != key:
			return "", problem.New(problem.MalformedRequest,
				"_meta %s differs from the Idempotency-Key header; send one or make them equal", keyMeta)
		}
		key = meta
	}
	if key == "" {
		return "", nil
	}
	if len(key) > maxKey {
		return "", problem.New(problem.MalformedRequest, "the idempotency key must be at most %d characters", maxKey)
	}
	return workflow.IdempotencyKey(frontdoor.Principal(r).ID(), keyPath, key), nil
}

// fingerprint identifies a call: its tool and its arguments, whatever
// their key order or spacing.
func fingerprint(req *sdk.CallToolRequest) string {
	args := req.Params.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	b, _ := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{req.Params.Name, args})
	return workflow.Fingerprint(b)
}
