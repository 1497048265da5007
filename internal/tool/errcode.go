package tool

import (
	"context"
	"errors"

	"github.com/agentplane/agentplane/internal/problem"
)

// Stable error codes of a failed tool call: a step's error_code says which
// one stopped it (docs/workflows.md says what to do about each).
const (
	// CodeTimeout: the call ran past its tool's or its workflow's time.
	CodeTimeout = "timeout"
	// CodeRateLimited: the call got no slot or rate token in time, or the
	// API answered 429 on every attempt.
	CodeRateLimited = "rate_limited"
	// CodeUpstream: the API answered an error status or reported a failure.
	CodeUpstream = "upstream_error"
	// CodeCircuitOpen: the tool's circuit is open; the call was not sent.
	CodeCircuitOpen = "circuit_open"
	// CodeTransport: the API could not be reached.
	CodeTransport = "transport"
	// CodeInvalidArguments: the arguments do not fit the operation; the
	// call was not sent.
	CodeInvalidArguments = "invalid_arguments"
	// CodeInputRequired and CodeAuthRequired: a remote A2A agent's task
	// stopped for input (TASK_STATE_INPUT_REQUIRED) or authentication
	// (TASK_STATE_AUTH_REQUIRED) a tool call cannot give.
	CodeInputRequired = "input_required"
	CodeAuthRequired  = "auth_required"
	// CodeInternal: anything else, agentplane's own failure.
	CodeInternal = "internal"
)

// ErrorCode returns the stable error_code of a call's error: its own when
// it carries one (an ErrorCode method, as package call's errors have).
func ErrorCode(err error) string {
	var coded interface{ ErrorCode() string }
	switch {
	case err == nil:
		return ""
	case errors.As(err, &coded):
		return coded.ErrorCode()
	case problem.Is(err, problem.ValidationFailed):
		return CodeInvalidArguments
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	}
	return CodeInternal
}
