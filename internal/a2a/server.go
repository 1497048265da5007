// Package a2a is the A2A front door: each agent's default version is an
// A2A agent at /a2a/{agent} (SPEC §4 "A2A", docs/a2a.md), protocol 1.0,
// written from the protocol's published specification (a2a.proto), over
// the JSON-RPC binding (POST /a2a/{agent}) and the HTTP+JSON binding
// (/a2a/{agent}/message:send and the rest), with its agent card and its
// tasks' push-notification configs.
//
// A task is a workflow, started through workflow.Invoker, read, followed
// and cancelled as /v1/workflows does. The protocol's messages are the
// wire package's; the errors' JSON-RPC codes and gRPC statuses are mapped
// from problem kinds here (errors.go). The handlers are mounted by the
// HTTP server's route table, whose middleware authenticates, admits,
// audits and rate-limits each request before it reaches them.
package a2a

import (
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// cancelWait bounds how long CancelTask waits for a running workflow to
// stop at its next step before it answers.
const cancelWait = 10 * time.Second

// maxMessageID bounds a message id, the message's idempotency key, as an
// Idempotency-Key header is bounded.
const maxMessageID = 255

// Deps are what the A2A server uses.
type Deps struct {
	Agents    agent.VersionStore
	Workflows workflow.Store
	Runner    *workflow.Runner
	Invoker   *workflow.Invoker
	// Webhooks keeps and sends the push-notification configs (nil: the
	// push methods answer a2a-push-notification-not-supported).
	Webhooks *webhook.Service
	Now      func() time.Time
	// PublicURL is the base of the card's URLs.
	PublicURL string
	// ExternalIssuer is the issuer of the server's tokens when it has no
	// embedded one ("": the card names this server's token endpoint).
	ExternalIssuer string
	// IdempotencyTTL is how long a message id finds the task it started.
	IdempotencyTTL time.Duration
	// Admit admits a request that brings a bearer token to a route public
	// to the others (the card): its token, the scope agents:invoke, its
	// tenant's rate.
	Admit func(w http.ResponseWriter, r *http.Request) error
	// Stream takes one of the tenant's event streams on this server;
	// release gives it back.
	Stream func(tenant string) (release func(), err error)
	// Record is the audit record of a request, stored with the push config
	// it creates or deletes.
	Record func(r *http.Request, status int) *audit.Record
	// Draining is closed when the server drains: open streams then end.
	Draining <-chan struct{}
}

// Server serves the A2A bindings of every agent.
type Server struct {
	d Deps
}

// New returns the A2A server of d.
func New(d Deps) *Server {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Server{d: d}
}

// call is one A2A request, whichever binding brought it.
type call struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	agent string
	// version and description are the agent's, as its card gives them.
	version, description string
	// rpc is set on the JSON-RPC binding.
	rpc bool
	// event wraps each streamed StreamResponse for the binding.
	event func(v any) any
}
