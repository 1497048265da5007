package tool

import (
	"context"
	"encoding/json"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/redact"
)

// CallRequest is one call of an operation; package call executes it.
type CallRequest struct {
	Tenant    string
	Tool      *Tool
	Operation *Operation
	// Args is the call's JSON object of arguments.
	Args map[string]any
	// IdempotencyKey is sent as Idempotency-Key on write operations of
	// tools with idempotency support.
	IdempotencyKey string
	WorkflowID     string
	Actor          audit.Actor
	RequestID      string
}

// RecordedRequest is the request as sent, without credentials: no
// Authorization header, no API key header or query parameter.
type RecordedRequest struct {
	Method string              `json:"method"`
	URL    string              `json:"url"`
	Header map[string][]string `json:"header,omitempty"`
	// Body is the JSON body, or a JSON string holding a non-JSON body.
	Body json.RawMessage `json:"body,omitempty"`
	// Places say where the call put its arguments, for redaction; they
	// are not stored.
	Places []redact.Place `json:"-"`
}

// CallResult is the outcome of a call that reached the API.
type CallResult struct {
	// Status is the API's HTTP status; 0 when no answer arrived.
	Status int `json:"status"`
	// Body is the answer as JSON: a JSON answer as is, a SOAP answer's body
	// element converted to JSON, a GraphQL answer's data.<field>.
	Body     json.RawMessage `json:"body,omitempty"`
	Request  RecordedRequest `json:"request"`
	Duration time.Duration   `json:"duration"`
	Attempts int             `json:"attempts"`
}

// callAuditDetails are what a tool.call record says: never bodies or secrets.
// The members are in their canonical order (RFC 8785: sorted), so the
// record's hash takes its details as encoded rather than encoding them
// again (audit.Record.Seal).
type callAuditDetails struct {
	Attempts   int    `json:"attempts"`
	DurationMS int64  `json:"duration_ms"`
	Kind       string `json:"kind"`
	Method     string `json:"method"`
	Operation  string `json:"operation"`
	Type       string `json:"type"`
	URL        string `json:"url"`
}

// CallAuditRecord is the audit record of one call: what was called, how it
// went and how long it took; never bodies, query strings or credentials.
// Callers that store calls themselves (the workflow runner) write it in the
// same transaction as the step.
func CallAuditRecord(ctx context.Context, req CallRequest, res CallResult, callErr error, at time.Time) *audit.Record {
	outcome := audit.Success
	if callErr != nil {
		outcome = audit.Error
	}
	var traceID string
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		traceID = sc.TraceID().String()
	}
	return &audit.Record{
		Time:       at,
		Tenant:     req.Tenant,
		Actor:      req.Actor,
		Action:     "tool.call",
		Resource:   audit.Resource{Type: "tool", ID: req.Tool.ID},
		Outcome:    outcome,
		Status:     res.Status,
		RequestID:  req.RequestID,
		TraceID:    traceID,
		WorkflowID: req.WorkflowID,
		Details: audit.Details(callAuditDetails{
			Operation:  req.Operation.ID,
			Type:       req.Tool.Type,
			Kind:       req.Operation.Kind,
			Method:     res.Request.Method,
			URL:        redact.URLIn(ctx, URLWithoutQuery(res.Request.URL)),
			DurationMS: res.Duration.Milliseconds(),
			Attempts:   res.Attempts,
		}),
	}
}

// URLWithoutQuery drops a URL's query, fragment and user information: query
// values are arguments or credentials, neither of which belongs in a log.
func URLWithoutQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}
