package a2a

import (
	"net/http"
	"strconv"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

// restErrorBody is the google.rpc.Status of an HTTP+JSON error, sent with
// the problem document's members (docs/a2a.md).
type restErrorBody struct {
	problem.Document
	Error restStatus `json:"error"`
}

type restStatus struct {
	Code    int              `json:"code"`
	Status  string           `json:"status"`
	Message string           `json:"message"`
	Details []map[string]any `json:"details,omitempty"`
}

// bindingErr is how a problem reads on the A2A bindings: the ErrorInfo reason
// of an A2A error ("" for others), the JSON-RPC code, the gRPC status name.
type bindingErr struct {
	reason string
	rpc    int
	grpc   string
}

var errs = map[problem.Code]bindingErr{
	problem.NotFound:                   {"TASK_NOT_FOUND", -32001, "NOT_FOUND"},
	problem.AgentVersionNotFound:       {"TASK_NOT_FOUND", -32001, "NOT_FOUND"},
	problem.A2ATaskNotCancelable:       {"TASK_NOT_CANCELABLE", -32002, "FAILED_PRECONDITION"},
	problem.A2APushNotSupported:        {"PUSH_NOTIFICATION_NOT_SUPPORTED", -32003, "FAILED_PRECONDITION"},
	problem.A2AUnsupportedOperation:    {"UNSUPPORTED_OPERATION", -32004, "FAILED_PRECONDITION"},
	problem.A2AContentTypeNotSupported: {"CONTENT_TYPE_NOT_SUPPORTED", -32005, "INVALID_ARGUMENT"},
	problem.A2AVersionNotSupported:     {"VERSION_NOT_SUPPORTED", -32009, "FAILED_PRECONDITION"},
	problem.MalformedRequest:           {"", -32602, "INVALID_ARGUMENT"},
	problem.ValidationFailed:           {"", -32602, "INVALID_ARGUMENT"},
	problem.URLNotAllowed:              {"", -32602, "INVALID_ARGUMENT"},
	problem.PayloadTooLarge:            {"", -32602, "INVALID_ARGUMENT"},
	problem.IdempotencyKeyReused:       {"", -32602, "INVALID_ARGUMENT"},
	problem.UnsupportedMediaType:       {"", -32602, "INVALID_ARGUMENT"},
	problem.Unauthenticated:            {"", -32600, "UNAUTHENTICATED"},
	problem.InsufficientScope:          {"", -32600, "PERMISSION_DENIED"},
	problem.RateLimited:                {"", -32600, "RESOURCE_EXHAUSTED"},
}

// errOf is the A2A reading of a problem.
func errOf(pe *problem.Error) bindingErr {
	if e, ok := errs[pe.Code]; ok {
		return e
	}
	if problem.Status(pe.Code) >= 500 {
		return bindingErr{"", -32603, "INTERNAL"}
	}
	return bindingErr{"", -32600, "FAILED_PRECONDITION"}
}

// answerREST runs an HTTP+JSON handler and answers its error with a
// problem document that is also the binding's google.rpc.Status.
func answerREST(w http.ResponseWriter, r *http.Request, h frontdoor.HandlerFunc) error {
	err := h(w, r)
	if err == nil {
		return nil
	}
	if sw, ok := w.(interface{ Started() bool }); ok && sw.Started() {
		return err
	}
	pe := problem.As(err)
	info := frontdoor.InfoFrom(r.Context())
	info.Problem = pe
	doc := pe.Doc(r.URL.Path, info.RequestID, info.TraceID)
	ae := errOf(pe)
	st := restStatus{Code: doc.Status, Status: ae.grpc, Message: doc.Title + ": " + doc.Detail}
	if ae.reason != "" {
		st.Details = []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": ae.reason, "domain": "a2a-protocol.org"}}
	}
	if pe.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(frontdoor.CeilSeconds(pe.RetryAfter.Seconds())))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	b, _ := frontdoor.Marshal(restErrorBody{Document: doc, Error: st})
	w.WriteHeader(doc.Status)
	_, _ = w.Write(b)
	return nil
}

// errPushNotSupported answers the push-notification methods on a server
// without webhooks.
var errPushNotSupported = problem.New(problem.A2APushNotSupported, "this server does not send push notifications (capabilities.pushNotifications is false)")

// errNoExtendedCard answers GetExtendedAgentCard.
var errNoExtendedCard = problem.New(problem.A2AUnsupportedOperation, "this agent has no extended card (capabilities.extendedAgentCard is false)")
