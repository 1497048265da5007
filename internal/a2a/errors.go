package a2a

import (
	"net/http"
	"strconv"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

// The A2A errors (docs/a2a.md): problem kinds of this protocol's own,
// whose documents and pages (/problems/{code}) are as any other code's.
var (
	VersionNotSupported = problem.Kind{Code: "a2a-version-not-supported", Status: http.StatusBadRequest,
		Title: "A2A version not supported",
		About: "The A2A-Version header (or parameter) names a protocol version this server does not speak; it speaks 1.0."}
	UnsupportedOperation = problem.Kind{Code: "a2a-unsupported-operation", Status: http.StatusBadRequest,
		Title: "A2A operation not supported",
		About: "The A2A operation, or a part of it, is not supported: a message to a task that has ended, a subscription to a finished task, a decision sent as a message."}
	TaskNotCancelable = problem.Kind{Code: "a2a-task-not-cancelable", Status: http.StatusBadRequest,
		Title: "A2A task not cancelable",
		About: "The task has already ended; it cannot be canceled."}
	ContentTypeNotSupported = problem.Kind{Code: "a2a-content-type-not-supported", Status: http.StatusBadRequest,
		Title: "A2A content type not supported",
		About: "The message has a part of a kind this agent does not take: it takes text parts (the goal) and one data part (the context)."}
	PushNotSupported = problem.Kind{Code: "a2a-push-notification-not-supported", Status: http.StatusBadRequest,
		Title: "A2A push notifications not supported",
		About: "This agent does not send push notifications."}
)

// Kinds are the A2A errors, in the order of the docs.
var Kinds = []problem.Kind{VersionNotSupported, UnsupportedOperation, TaskNotCancelable, ContentTypeNotSupported, PushNotSupported}

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

// bindingErr is how a problem reads on the A2A bindings, the one table
// from problem kinds to the protocol's codes: the ErrorInfo reason
// of an A2A error ("" for others), the JSON-RPC code, the gRPC status name.
type bindingErr struct {
	reason string
	rpc    int
	grpc   string
}

var errs = map[problem.Code]bindingErr{
	problem.NotFound:             {"TASK_NOT_FOUND", -32001, "NOT_FOUND"},
	problem.AgentVersionNotFound: {"TASK_NOT_FOUND", -32001, "NOT_FOUND"},
	TaskNotCancelable.Code:       {"TASK_NOT_CANCELABLE", -32002, "FAILED_PRECONDITION"},
	PushNotSupported.Code:        {"PUSH_NOTIFICATION_NOT_SUPPORTED", -32003, "FAILED_PRECONDITION"},
	UnsupportedOperation.Code:    {"UNSUPPORTED_OPERATION", -32004, "FAILED_PRECONDITION"},
	ContentTypeNotSupported.Code: {"CONTENT_TYPE_NOT_SUPPORTED", -32005, "INVALID_ARGUMENT"},
	VersionNotSupported.Code:     {"VERSION_NOT_SUPPORTED", -32009, "FAILED_PRECONDITION"},
	problem.MalformedRequest:     {"", -32602, "INVALID_ARGUMENT"},
	problem.ValidationFailed:     {"", -32602, "INVALID_ARGUMENT"},
	problem.URLNotAllowed:        {"", -32602, "INVALID_ARGUMENT"},
	problem.PayloadTooLarge:      {"", -32602, "INVALID_ARGUMENT"},
	problem.IdempotencyKeyReused: {"", -32602, "INVALID_ARGUMENT"},
	problem.UnsupportedMediaType: {"", -32602, "INVALID_ARGUMENT"},
	problem.Unauthenticated:      {"", -32600, "UNAUTHENTICATED"},
	problem.InsufficientScope:    {"", -32600, "PERMISSION_DENIED"},
	problem.RateLimited:          {"", -32600, "RESOURCE_EXHAUSTED"},
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
var errPushNotSupported = PushNotSupported.New("this server does not send push notifications (capabilities.pushNotifications is false)")

// errNoExtendedCard answers GetExtendedAgentCard.
var errNoExtendedCard = UnsupportedOperation.New("this agent has no extended card (capabilities.extendedAgentCard is false)")
