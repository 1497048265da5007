package llm

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/agent"
	masking "github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/telemetry"
)

// Attribute keys of the OpenTelemetry GenAI semantic conventions.
const (
	keyOperation     = attribute.Key("gen_ai.operation.name")
	keyProvider      = attribute.Key("gen_ai.provider.name")
	keyRequestModel  = attribute.Key("gen_ai.request.model")
	keyTemperature   = attribute.Key("gen_ai.request.temperature")
	keyMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	keyResponseModel = attribute.Key("gen_ai.response.model")
	keyResponseID    = attribute.Key("gen_ai.response.id")
	keyFinish        = attribute.Key("gen_ai.response.finish_reasons")
	keyInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	keyInput         = attribute.Key("gen_ai.input.messages")
	keyOutput        = attribute.Key("gen_ai.output.messages")
	keyErrorType     = attribute.Key("error.type")
	keyServerAddress = attribute.Key("server.address")
)

// startSpan starts the chat span of a completion.
func (c *client) startSpan(ctx context.Context, req agent.ChatRequest) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		keyOperation.String("chat"),
		keyProvider.String(c.call.name()),
		keyRequestModel.String(c.model.Model),
		keyServerAddress.String(c.base.Hostname()),
	}
	if id := telemetry.Conversation(ctx); id != "" {
		attrs = append(attrs, telemetry.KeyConversationID.String(id))
	}
	if req.Temperature != nil {
		attrs = append(attrs, keyTemperature.Float64(*req.Temperature))
	}
	if req.MaxOutputTokens > 0 {
		attrs = append(attrs, keyMaxTokens.Int64(req.MaxOutputTokens))
	}
	if c.pool.opts.CaptureContent {
		attrs = append(attrs, keyInput.String(contentJSON(req.Messages)))
	}
	return c.pool.tracer.Start(ctx, "chat "+c.model.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan records the completion's outcome and ends the span.
func (c *client) endSpan(ctx context.Context, span trace.Span, resp agent.ChatResponse, err error) {
	defer span.End()
	if err != nil {
		errType := "error"
		var le *agent.LLMError
		switch {
		case errors.As(err, &le) && le.Status != 0:
			errType = strconv.Itoa(le.Status)
		case errors.As(err, &le):
			errType = "llm_error"
		case errors.Is(err, context.DeadlineExceeded):
			errType = "deadline_exceeded"
		case errors.Is(err, context.Canceled):
			errType = "canceled"
		}
		span.SetAttributes(keyErrorType.String(errType))
		span.SetStatus(codes.Error, masking.TextIn(ctx, err.Error()))
		return
	}
	attrs := []attribute.KeyValue{keyResponseModel.String(resp.Model), keyResponseID.String(resp.ID)}
	if resp.FinishReason != "" {
		attrs = append(attrs, keyFinish.StringSlice([]string{resp.FinishReason}))
	}
	if resp.Usage != nil {
		attrs = append(attrs, keyInputTokens.Int64(resp.Usage.InputTokens), keyOutputTokens.Int64(resp.Usage.OutputTokens))
	}
	if c.pool.opts.CaptureContent {
		out := []agent.ChatMessage{resp.Message}
		attrs = append(attrs, keyOutput.String(masking.TextIn(ctx, contentJSON(out, resp.FinishReason))))
	}
	span.SetAttributes(attrs...)
}

// part is a message part in the GenAI conventions' JSON form.
type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

// message is a message in the GenAI conventions' JSON form.
type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// contentJSON writes messages as gen_ai.input.messages or, with a finish
// reason, gen_ai.output.messages.
func contentJSON(msgs []agent.ChatMessage, finish ...string) string {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		gm := message{Role: m.Role, Parts: []part{}}
		if len(finish) > 0 {
			gm.FinishReason = finish[0]
		}
		switch {
		case m.Role == agent.RoleTool:
			gm.Parts = append(gm.Parts, part{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		case m.Content != "":
			gm.Parts = append(gm.Parts, part{Type: "text", Content: m.Content})
		}
		for _, tc := range m.ToolCalls {
			p := part{Type: "tool_call", ID: tc.ID, Name: tc.Name}
			if json.Valid([]byte(tc.Arguments)) {
				p.Arguments = json.RawMessage(tc.Arguments)
			}
			gm.Parts = append(gm.Parts, p)
		}
		out = append(out, gm)
	}
	b, _ := json.Marshal(out)
	return string(b)
}
