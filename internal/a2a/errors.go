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

// JSON-RPC error codes: JSON-RPC 2.0's own and A2A's (a2a.proto).
const (
	rpcParseError              = -32700
	rpcInvalidRequest          = -32600
	rpcMethodNotFound          = -32601
	rpcInvalidParams           = -32602
	rpcInternal                = -32603
	rpcTaskNotFound            = -32001
	rpcTaskNotCancelable       = -32002
	rpcPushNotSupported        = -32003
	rpcUnsupportedOperation    = -32004
	rpcContentTypeNotSupported = -32005
	rpcVersionNotSupported     = -32009
)

// bindingErr is how a problem reads on the A2A bindings: the ErrorInfo
// reason of an A2A error ("" for others), the JSON-RPC code, the gRPC
// status name.
type bindingErr struct {
	reason string
	rpc    int
	grpc   string
}

// errs is the one table from problem kinds to the bindings' errors.
var errs = map[problem.Code]bindingErr{
	problem.NotFound:             {"TASK_NOT_FOUND", rpcTaskNotFound, "NOT_FOUND"},
	problem.AgentVersionNotFound: {"TASK_NOT_FOUND", rpcTaskNotFound, "NOT_FOUND"},
	TaskNotCancelable.Code:       {"TASK_NOT_CANCELABLE", rpcTaskNotCancelable, "FAILED_PRECONDITION"},
	PushNotSupported.Code:        {"PUSH_NOTIFICATION_NOT_SUPPORTED", rpcPushNotSupported, "FAILED_PRECONDITION"},
	UnsupportedOperation.Code:    {"UNSUPPORTED_OPERATION", rpcUnsupportedOperation, "FAILED_PRECONDITION"},
	ContentTypeNotSupported.Code: {"CONTENT_TYPE_NOT_SUPPORTED", rpcContentTypeNotSupported, "INVALID_ARGUMENT"},
	VersionNotSupported.Code:     {"VERSION_NOT_SUPPORTED", rpcVersionNotSupported, "FAILED_PRECONDITION"},
	problem.MalformedRequest:     {"", rpcInvalidParams, "INVALID_ARGUMENT"},
	problem.ValidationFailed:     {"", rpcInvalidParams, "INVALID_ARGUMENT"},
	problem.URLNotAllowed:        {"", rpcInvalidParams, "INVALID_ARGUMENT"},
	problem.PayloadTooLarge:      {"", rpcInvalidParams, "INVALID_ARGUMENT"},
	problem.IdempotencyKeyReused: {"", rpcInvalidParams, "INVALID_ARGUMENT"},
	problem.UnsupportedMediaType: {"", rpcInvalidParams, "INVALID_ARGUMENT"},
	problem.Unauthenticated:      {"", rpcInvalidRequest, "UNAUTHENTICATED"},
	problem.InsufficientScope:    {"", rpcInvalidRequest, "PERMISSION_DENIED"},
	problem.RateLimited:          {"", rpcInvalidRequest, "RESOURCE_EXHAUSTED"},
}

// errOf is the A2A reading of a problem.
func errOf(pe *problem.Error) bindingErr {
	if e, ok := errs[pe.Code]; ok {
		return e
	}
	if problem.Status(pe.Code) >= 500 {
		return bindingErr{"", rpcInternal, "INTERNAL"}
	}
	return bindingErr{"", rpcInvalidRequest, "FAILED_PRECONDITION"}
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
