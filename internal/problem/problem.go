// Package problem defines the kinds of error a client can act on and their
// RFC 9457 problem documents. Domain packages return *Error values; the HTTP
// adapter turns them into responses through the single table in this package.
package problem

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Code is the stable, bare error code of a problem document.
type Code string

// The stable set of codes (SPEC §3). Add one only with a page and a test.
const (
	MalformedRequest      Code = "malformed-request"
	Unauthenticated       Code = "unauthenticated"
	InsufficientScope     Code = "insufficient-scope"
	CSRFTokenInvalid      Code = "csrf-token-invalid"
	NotFound              Code = "not-found"
	AgentVersionNotFound  Code = "agent-version-not-found"
	AgentVersionArchived  Code = "agent-version-archived"
	MethodNotAllowed      Code = "method-not-allowed"
	Conflict              Code = "conflict"
	IdempotencyKeyInUse   Code = "idempotency-key-in-use"
	WorkflowNotReplayable Code = "workflow-not-replayable"
	PayloadTooLarge       Code = "payload-too-large"
	HeadersTooLarge       Code = "headers-too-large"
	UnsupportedMediaType  Code = "unsupported-media-type"
	ValidationFailed      Code = "validation-failed"
	IdempotencyKeyReused  Code = "idempotency-key-reused"
	SpecUnreachable       Code = "spec-unreachable"
	SpecInvalid           Code = "spec-invalid"
	SpecTooLarge          Code = "spec-too-large"
	URLNotAllowed         Code = "url-not-allowed"
	SecretRefNotAllowed   Code = "secret-ref-not-allowed"
	RateLimited           Code = "rate-limited"
	Internal              Code = "internal"
	Unavailable           Code = "unavailable"
	// WorkflowFailed is never a response status: it is the error member of
	// a failed workflow and of its stream's complete event.
	WorkflowFailed Code = "workflow-failed"
)

// TypeBase prefixes every problem type URI, whatever the deployment.
const TypeBase = "https://agentplane.dev/problems/"

// Kind describes one code: its status, its title and the explanation on its page.
type Kind struct {
	Code   Code
	Status int
	Title  string
	About  string
}

// Kinds is the one table mapping codes to statuses, in the order of the docs.
// A protocol's own errors (A2A's) are kinds its front door defines and
// makes errors of with Kind.New; the table holds every other code.
var Kinds = []Kind{
	{MalformedRequest, http.StatusBadRequest, "Malformed request", "The body is not valid JSON, has unknown fields or has values of the wrong type."},
	{Unauthenticated, http.StatusUnauthorized, "Unauthenticated", "The bearer token is missing, expired or invalid. Obtain a new access token and retry."},
	{InsufficientScope, http.StatusForbidden, "Insufficient scope", "The token is valid but lacks the scope this endpoint needs; the WWW-Authenticate header names it."},
	{CSRFTokenInvalid, http.StatusForbidden, "CSRF token invalid", "A console form came without its session's CSRF token, or with another one. Reload the page and send the form again."},
	{NotFound, http.StatusNotFound, "Not found", "No such resource exists in the caller's tenant."},
	{AgentVersionNotFound, http.StatusNotFound, "Agent version not found", "The agent exists in no version of that name, or the agent does not exist."},
	{AgentVersionArchived, http.StatusConflict, "Agent version archived", "The agent version (or the whole agent) was archived: its history stays readable, but it can no longer be invoked or replayed against. Deploy a new version or name a live one."},
	{MethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed", "The resource does not support this HTTP method; the Allow header lists those it does."},
	{Conflict, http.StatusConflict, "Conflict", "The request conflicts with the current state: a name already taken, a version already deployed, a resource still in use."},
	{IdempotencyKeyInUse, http.StatusConflict, "Idempotency key in use", "A request with the same idempotency key is still executing. Retry after the Retry-After interval."},
	{WorkflowNotReplayable, http.StatusConflict, "Workflow not replayable", "The workflow is still running; only finished workflows can be replayed."},
	{PayloadTooLarge, http.StatusRequestEntityTooLarge, "Payload too large", "The request body is over the size limit."},
	{HeadersTooLarge, http.StatusRequestHeaderFieldsTooLarge, "Headers too large", "The request line and headers together are over the size limit (64 KiB)."},
	{UnsupportedMediaType, http.StatusUnsupportedMediaType, "Unsupported media type", "The request body must be JSON (Content-Type: application/json)."},
	{ValidationFailed, http.StatusUnprocessableEntity, "Validation failed", "The request is well formed but breaks a rule; the errors member lists each field and what is wrong with it."},
	{IdempotencyKeyReused, http.StatusUnprocessableEntity, "Idempotency key reused", "The idempotency key was already used with a different request. Use a new key for a new request."},
	{SpecUnreachable, http.StatusUnprocessableEntity, "Spec unreachable", "The spec_url could not be fetched: an error status, a time-out or a name that does not resolve."},
	{SpecInvalid, http.StatusUnprocessableEntity, "Spec invalid", "The document is not a valid specification of the stated type."},
	{SpecTooLarge, http.StatusUnprocessableEntity, "Spec too large", "The specification document is over the size limit."},
	{URLNotAllowed, http.StatusUnprocessableEntity, "URL not allowed", "The URL's scheme or the address it resolves to is refused (loopback, private, link-local and metadata addresses unless the operator allows them)."},
	{SecretRefNotAllowed, http.StatusUnprocessableEntity, "Secret reference not allowed", "The secrets_ref is outside the references the operator allows for this tenant."},
	{RateLimited, http.StatusTooManyRequests, "Rate limited", "The tenant or client is over its request rate. Retry after the Retry-After interval."},
	{Internal, http.StatusInternalServerError, "Internal error", "The server failed unexpectedly. The request_id identifies the failure in the server's logs."},
	{WorkflowFailed, http.StatusUnprocessableEntity, "Workflow failed", "The workflow could not complete: a step failed, a tool answered with an error, the workflow timed out, or the server stopped while a call that is unsafe to repeat was in flight (interrupted). The detail says which; the workflow's steps show where."},
	{Unavailable, http.StatusServiceUnavailable, "Service unavailable", "The service cannot serve the request right now: storage is down or the server is shutting down."},
}

// New returns an error of kind k, a kind of a protocol's own, with a
// formatted detail; its document is made from k.
func (k Kind) New(format string, args ...any) *Error {
	return &Error{Code: k.Code, Detail: fmt.Sprintf(format, args...), kind: &k}
}

var byCode = func() map[Code]Kind {
	m := make(map[Code]Kind, len(Kinds))
	for _, k := range Kinds {
		m[k.Code] = k
	}
	return m
}()

// Lookup returns the kind of a code.
func Lookup(c Code) (Kind, bool) {
	k, ok := byCode[c]
	return k, ok
}

// Status returns the HTTP status of a code, 500 for an unknown one.
func Status(c Code) int {
	if k, ok := byCode[c]; ok {
		return k.Status
	}
	return http.StatusInternalServerError
}

// FieldError names one field of a request and what is wrong with it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error a client can act on.
type Error struct {
	Code   Code
	Detail string
	// Errors lists the fields at fault, for ValidationFailed.
	Errors []FieldError
	// RetryAfter, when set, becomes the Retry-After header.
	RetryAfter time.Duration
	// Scope names the missing scope, for InsufficientScope.
	Scope string
	// Allow lists the allowed methods, for MethodNotAllowed.
	Allow []string
	// Err is the cause: logged, never sent.
	Err error
	// kind is the kind of a code outside Kinds (Kind.New).
	kind *Kind
}

func (e *Error) Error() string {
	msg := string(e.Code)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of the given code with a formatted detail.
func New(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Detail: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of the given code whose cause is err.
func Wrap(c Code, err error, format string, args ...any) *Error {
	return &Error{Code: c, Detail: fmt.Sprintf(format, args...), Err: err}
}

// Validation returns a ValidationFailed error listing the fields at fault.
func Validation(errs ...FieldError) *Error {
	detail := "the request breaks a rule"
	if len(errs) == 1 {
		detail = errs[0].Field + ": " + errs[0].Message
	} else if len(errs) > 1 {
		detail = fmt.Sprintf("%d fields are invalid", len(errs))
	}
	return &Error{Code: ValidationFailed, Detail: detail, Errors: errs}
}

// Field returns a ValidationFailed error about one field.
func Field(field, format string, args ...any) *Error {
	return Validation(FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// As returns the *Error in err's chain, or an Internal error wrapping err.
func As(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Code: Internal, Err: err}
}

// Is reports whether err carries the given code.
func Is(err error, c Code) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Code == c
}

// Document is an RFC 9457 problem document with agentplane's extensions.
type Document struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	Instance  string       `json:"instance,omitempty"`
	Code      Code         `json:"code"`
	RequestID string       `json:"request_id,omitempty"`
	TraceID   string       `json:"trace_id,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
	// ErrorCode is the stable cause of a failed workflow or step
	// (timeout, nondeterministic, internal, …): only on workflow-failed.
	ErrorCode string `json:"error_code,omitempty"`
}

// Doc builds the problem document of an error; the cause never appears in it.
func (e *Error) Doc(instance, requestID, traceID string) Document {
	k, ok := byCode[e.Code]
	switch {
	case ok:
	case e.kind != nil && e.kind.Code == e.Code:
		k = *e.kind
	default:
		k = byCode[Internal]
	}
	detail := e.Detail
	if k.Code == Internal {
		detail = "the server failed to handle the request"
	}
	return Document{
		Type:      TypeBase + string(k.Code),
		Title:     k.Title,
		Status:    k.Status,
		Detail:    detail,
		Instance:  instance,
		Code:      k.Code,
		RequestID: requestID,
		TraceID:   traceID,
		Errors:    e.Errors,
	}
}
