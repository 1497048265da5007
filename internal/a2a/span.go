package a2a

import (
	"errors"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/telemetry"
)

var tracer = telemetry.Tracer("github.com/agentplane/agentplane/internal/a2a")

// Attribute keys of the A2A server span (OpenTelemetry GenAI conventions
// gen-ai 1.42, a2a.server).
const (
	keyMethod          = attribute.Key("a2a.method.name")
	keyMessageID       = attribute.Key("a2a.message.id")
	keyTaskID          = attribute.Key("a2a.task.id")
	keyTaskState       = attribute.Key("a2a.task.state")
	keyTenant          = attribute.Key("a2a.tenant")
	keyProtocolVersion = attribute.Key("a2a.protocol.version")
	keyReferenceTasks  = attribute.Key("a2a.message.reference_task_ids")
	keyAgentName       = attribute.Key("gen_ai.agent.name")
	keyAgentVersion    = attribute.Key("gen_ai.agent.version")
	keyAgentDesc       = attribute.Key("gen_ai.agent.description")
	keyClientAddress   = attribute.Key("client.address")
	keyClientPort      = attribute.Key("client.port")
)

// traced serves one A2A method of c within its A2A server span, a child
// of the request's HTTP server span named after the method: the request's
// own attributes (attrs), the task fn answers with (its id, state and
// context), and error.type when fn fails: the JSON-RPC error code on the
// JSON-RPC binding, the HTTP status on HTTP+JSON.
func (c *call) traced(method string, attrs []attribute.KeyValue, fn func() (any, error)) (any, error) {
	base := []attribute.KeyValue{keyMethod.String(method), keyProtocolVersion.String(wire.Version),
		keyAgentName.String(c.agent)}
	if c.version != "" {
		base = append(base, keyAgentVersion.String(c.version))
	}
	if c.description != "" {
		base = append(base, keyAgentDesc.String(c.description))
	}
	if host, port, err := net.SplitHostPort(c.r.RemoteAddr); err == nil {
		base = append(base, keyClientAddress.String(host))
		if n, err := strconv.Atoi(port); err == nil {
			base = append(base, keyClientPort.Int(n))
		}
	}
	ctx, span := tracer.Start(c.r.Context(), method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(append(base, attrs...)...))
	defer span.End()
	c.r = c.r.WithContext(ctx)
	res, err := fn()
	switch t := res.(type) {
	case wire.Task:
		span.SetAttributes(taskAttrs(t)...)
	case map[string]any:
		if t, ok := t["task"].(wire.Task); ok {
			span.SetAttributes(taskAttrs(t)...)
		}
	}
	if err != nil {
		pe := problem.As(err)
		code := strconv.Itoa(problem.Status(pe.Code))
		var re *errRPC
		switch {
		case c.rpc && errors.As(err, &re):
			code = strconv.Itoa(re.code)
		case c.rpc:
			code = strconv.Itoa(errOf(pe).rpc)
		}
		span.SetAttributes(telemetry.KeyErrorType.String(code))
		span.SetStatus(codes.Error, pe.Detail)
	}
	return res, err
}

// taskAttrs are the span attributes of a task: its id, state, and its
// context as the GenAI conversation.
func taskAttrs(t wire.Task) []attribute.KeyValue {
	out := []attribute.KeyValue{keyTaskID.String(t.ID), keyTaskState.String(string(t.Status.State))}
	if t.ContextID != "" {
		out = append(out, telemetry.KeyConversationID.String(t.ContextID))
	}
	return out
}

// sendAttrs are the span attributes of a SendMessage request.
func sendAttrs(req wire.SendMessageRequest) []attribute.KeyValue {
	var out []attribute.KeyValue
	if req.Tenant != "" {
		out = append(out, keyTenant.String(req.Tenant))
	}
	if m := req.Message; m != nil {
		if m.MessageID != "" {
			out = append(out, keyMessageID.String(m.MessageID))
		}
		if m.TaskID != "" {
			out = append(out, keyTaskID.String(m.TaskID))
		}
		if m.ContextID != "" {
			out = append(out, telemetry.KeyConversationID.String(m.ContextID))
		}
		if len(m.ReferenceTaskIDs) > 0 {
			out = append(out, keyReferenceTasks.StringSlice(m.ReferenceTaskIDs))
		}
	}
	return out
}

// taskRequestAttrs are the span attributes of a request naming a task.
func taskRequestAttrs(tenant, id string) []attribute.KeyValue {
	var out []attribute.KeyValue
	if tenant != "" {
		out = append(out, keyTenant.String(tenant))
	}
	if id != "" {
		out = append(out, keyTaskID.String(id))
	}
	return out
}
