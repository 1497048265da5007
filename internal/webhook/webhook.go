// Package webhook sends a tenant's events to its HTTP endpoints under the
// Standard Webhooks specification (https://www.standardwebhooks.com):
// each delivery is a POST of {type, timestamp, data} (or what the
// Deliverer's Format makes of it: an A2A push-notification config's
// StreamResponse) with the headers webhook-id, webhook-timestamp and
// webhook-signature ("v1," + base64 HMAC-SHA256 of "id.timestamp.body"
// under the endpoint's secret).
//
// Deliveries are an outbox: the store writes them, one per matching
// webhook, in the transaction that stores the event itself (a workflow's
// end, its suspension at an approval, a decision), so an event is never
// lost nor sent for a write that rolled back. Any replica's Deliverer
// leases due deliveries and sends them, at least once, in order per
// webhook and workflow, retrying with exponential backoff and jitter for
// 24 hours, under the same webhook-id.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Event types.
const (
	WorkflowCompleted    = "workflow.completed"
	WorkflowFailed       = "workflow.failed"
	WorkflowCancelled    = "workflow.cancelled"
	WorkflowWaiting      = "workflow.waiting"
	ApprovalDecided      = "approval.decided"
	ReplayCompleted      = "replay.completed"
	ReplayBatchCompleted = "replay_batch.completed"
	ToolDrifted          = "tool.drifted"
	RolloutStarted       = "rollout.started"
	RolloutRolledBack    = "rollout.rolled_back"
	RolloutPromoted      = "rollout.promoted"
	RolloutEnded         = "rollout.ended"
)

// EventTypes are the events a webhook may subscribe to.
var EventTypes = []string{WorkflowCompleted, WorkflowFailed, WorkflowCancelled, WorkflowWaiting,
	ApprovalDecided, ReplayCompleted, ReplayBatchCompleted, ToolDrifted,
	RolloutStarted, RolloutRolledBack, RolloutPromoted, RolloutEnded}

// Delivery statuses.
const (
	Pending   = "pending"
	Delivered = "delivered"
	Failed    = "failed"
)

// SecretPrefix starts every secret, as the Standard Webhooks libraries expect.
const SecretPrefix = "whsec_"

// RetryFor is how long a delivery is retried before it is failed; a
// rotated secret keeps signing for as long.
const RetryFor = 24 * time.Hour

// Webhook is a tenant's endpoint and the events it receives.
type Webhook struct {
	ID     string   `json:"id"`
	Tenant string   `json:"-"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Agent  string   `json:"agent,omitempty"`
	// WorkflowID, when set, limits the webhook to that workflow's events:
	// it is an A2A task's push-notification config (docs/a2a.md).
	WorkflowID  string    `json:"workflow_id,omitempty"`
	Description string    `json:"description,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// Secret signs deliveries; PreviousSecret, until PreviousUntil, signs
	// them too (after a rotation). Neither is ever shown but at creation
	// and rotation.
	Secret         string    `json:"-"`
	PreviousSecret string    `json:"-"`
	PreviousUntil  time.Time `json:"-"`
}

// Event is one occurrence, as the store queues it for each webhook that
// subscribes to its type (and, when the webhook names one, its agent).
type Event struct {
	// ID makes each delivery's webhook-id with the webhook's id.
	ID     string
	Tenant string
	Type   string
	Agent  string
	// OrderKey orders deliveries: one webhook receives the events of one
	// key (a workflow) in the order they were stored.
	OrderKey string
	// Body is the payload: {type, timestamp, data}.
	Body json.RawMessage
	At   time.Time
}

// Delivery is one event sent to one webhook.
type Delivery struct {
	// ID is the webhook-id of every attempt.
	ID          string          `json:"id"`
	Seq         int64           `json:"-"`
	Tenant      string          `json:"-"`
	WebhookID   string          `json:"webhook_id"`
	Type        string          `json:"type"`
	OrderKey    string          `json:"workflow_id,omitempty"`
	Body        json.RawMessage `json:"-"`
	Status      string          `json:"status"`
	Attempts    int             `json:"attempts"`
	NextAttempt time.Time       `json:"next_attempt_at,omitzero"`
	// LastStatus is the HTTP status of the last attempt, 0 for none (or
	// no answer); LastError what went wrong with it.
	LastStatus  int       `json:"last_status_code,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
}

// Outcome is what one attempt of a delivery came to.
type Outcome struct {
	Status      string // Delivered, Pending (retry at NextAttempt) or Failed
	Attempts    int
	NextAttempt time.Time
	HTTPStatus  int
	Error       string
	At          time.Time
}

// Store keeps webhooks and their deliveries.
type Store interface {
	CreateWebhook(ctx context.Context, w *Webhook, rec *audit.Record) error
	// Webhook returns a webhook of the tenant, or problem.NotFound.
	Webhook(ctx context.Context, tenant, id string) (*Webhook, error)
	ListWebhooks(ctx context.Context, tenant string) ([]*Webhook, error)
	// DeleteWebhook deletes a webhook and its deliveries.
	DeleteWebhook(ctx context.Context, tenant, id string, rec *audit.Record) error
	// RotateSecret makes secret the webhook's, the current one signing
	// too until previousUntil.
	RotateSecret(ctx context.Context, tenant, id, secret string, previousUntil time.Time, rec *audit.Record) error
	// Deliveries lists a webhook's deliveries, newest first, of one status
	// ("" for all).
	Deliveries(ctx context.Context, tenant, webhookID, status string, limit int) ([]*Delivery, error)
	// RetryDelivery makes a delivery pending again, due at once, or returns
	// problem.NotFound.
	RetryDelivery(ctx context.Context, tenant, webhookID, id string, now time.Time, rec *audit.Record) (*Delivery, error)
	// ClaimDeliveries leases up to limit due deliveries to owner until
	// until: pending, due by now, not leased, and the first undelivered
	// one of their webhook and order key.
	ClaimDeliveries(ctx context.Context, owner string, now, until time.Time, limit int) ([]*Delivery, error)
	// FinishAttempt records an attempt of a delivery owner leases and
	// drops the lease; false when owner no longer held it.
	FinishAttempt(ctx context.Context, owner, id string, o Outcome) (bool, error)
}

// NotFound is the error of a webhook the tenant does not have.
func NotFound(id string) error {
	return problem.New(problem.NotFound, "webhook %s not found", id)
}

// NewSecret is a new signing secret: whsec_ and the base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Sign is the signature of one attempt under secret: "v1," and the base64
// HMAC-SHA256 of "id.timestamp.body", keyed by the secret's decoded bytes.
func Sign(secret, id string, ts time.Time, body []byte) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		key = []byte(secret)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Signatures is the webhook-signature header of one attempt: the current
// secret's signature and, while a rotated secret still signs, its own,
// space-separated.
func (w *Webhook) Signatures(id string, ts time.Time, body []byte) string {
	sig := Sign(w.Secret, id, ts, body)
	if w.PreviousSecret != "" && ts.Before(w.PreviousUntil) {
		sig += " " + Sign(w.PreviousSecret, id, ts, body)
	}
	return sig
}

// payload is the body of every delivery.
type payload struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

func newEvent(tenant, typ, agentName, key string, at time.Time, data any) *Event {
	at = at.UTC()
	body, err := json.Marshal(payload{Type: typ, Timestamp: at.Format(time.RFC3339Nano), Data: data})
	if err != nil {
		return nil
	}
	return &Event{ID: ids.NewAt("", at), Tenant: tenant, Type: typ, Agent: agentName, OrderKey: key, Body: body, At: at}
}

// RolloutEvent is the event of a change of an agent's rollout (package
// rollout makes its data), ordered by the rollout's id.
func RolloutEvent(tenant, typ, agentName, rolloutID string, at time.Time, data any) *Event {
	return newEvent(tenant, typ, agentName, rolloutID, at, data)
}

// workflowData is the data of a workflow's events.
type workflowData struct {
	WorkflowID   string          `json:"workflow_id"`
	Agent        string          `json:"agent"`
	AgentVersion string          `json:"agent_version"`
	Status       string          `json:"status"`
	Outcome      string          `json:"outcome,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	Error        json.RawMessage `json:"error,omitempty"`
	StartedAt    time.Time       `json:"started_at"`
	FinishedAt   time.Time       `json:"finished_at,omitzero"`
	ScheduleID   string          `json:"schedule_id,omitempty"`
}

// Finished is the event of a workflow's end, nil for a status without one.
func Finished(w *workflow.Workflow) *Event {
	typ := map[string]string{workflow.Completed: WorkflowCompleted, workflow.Failed: WorkflowFailed,
		workflow.Cancelled: WorkflowCancelled}[w.Status]
	if typ == "" {
		return nil
	}
	return newEvent(w.Tenant, typ, w.Agent, w.ID, w.FinishedAt, workflowData{
		WorkflowID: w.ID, Agent: w.Agent, AgentVersion: w.AgentVersion, Status: w.Status, Outcome: w.Outcome,
		Output: w.Output, Error: w.Error, StartedAt: w.StartedAt, FinishedAt: w.FinishedAt, ScheduleID: w.ScheduleID})
}

// Waiting is the event of a workflow suspended at an approval.
func Waiting(a *workflow.Approval) *Event {
	return newEvent(a.Tenant, WorkflowWaiting, a.Agent, a.WorkflowID, a.RequestedAt, a)
}

// WorkflowEvent is the body of a workflow's event read back: the workflow
// as the event saw it and, at an approval, the approval's reason.
type WorkflowEvent struct {
	Type     string
	At       time.Time
	Workflow workflow.Workflow
	Reason   string
}

// ReadWorkflowEvent reads the body of a workflow event (Finished, Waiting).
func ReadWorkflowEvent(body []byte) (*WorkflowEvent, error) {
	var p struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("event body: %w", err)
	}
	ev := &WorkflowEvent{Type: p.Type, At: p.Timestamp}
	switch p.Type {
	case WorkflowCompleted, WorkflowFailed, WorkflowCancelled:
		var d workflowData
		if err := json.Unmarshal(p.Data, &d); err != nil {
			return nil, fmt.Errorf("%s data: %w", p.Type, err)
		}
		ev.Workflow = workflow.Workflow{ID: d.WorkflowID, Agent: d.Agent, AgentVersion: d.AgentVersion, Status: d.Status,
			Outcome: d.Outcome, Output: d.Output, Error: d.Error, StartedAt: d.StartedAt, FinishedAt: d.FinishedAt, ScheduleID: d.ScheduleID}
	case WorkflowWaiting:
		var a workflow.Approval
		if err := json.Unmarshal(p.Data, &a); err != nil {
			return nil, fmt.Errorf("%s data: %w", p.Type, err)
		}
		ev.Workflow = workflow.Workflow{ID: a.WorkflowID, Agent: a.Agent, AgentVersion: a.AgentVersion, Status: workflow.Waiting}
		ev.Reason = a.Reason
	default:
		return nil, fmt.Errorf("%q is not a workflow event", p.Type)
	}
	return ev, nil
}

// Decided is the event of an approval's decision.
func Decided(a *workflow.Approval) *Event {
	return newEvent(a.Tenant, ApprovalDecided, a.Agent, a.WorkflowID, a.DecidedAt, a)
}

// DeliveryID is the webhook-id of an event's delivery to a webhook:
// "msg_", the event's ULID and the webhook's.
func DeliveryID(eventID, webhookID string) string {
	return "msg_" + eventID + strings.TrimPrefix(webhookID, "whk_")
}

// replayData is the data of replay.completed: the replay without its steps.
type replayData struct {
	ReplayID         string    `json:"replay_id"`
	WorkflowID       string    `json:"workflow_id"`
	Target           string    `json:"target_agent_version"`
	DryRun           bool      `json:"dry_run"`
	OriginalVersion  string    `json:"original_agent_version"`
	OriginalOutcome  string    `json:"original_outcome"`
	ReplayOutcome    string    `json:"replay_outcome"`
	ReplayError      string    `json:"replay_error,omitempty"`
	Delta            any       `json:"delta"`
	ReplayWorkflowID string    `json:"replay_workflow_id,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
}

// ReplayDone is the event of a stored replay: replay.completed, ordered
// with the events of the workflow it replays.
func ReplayDone(r *replay.Replay) *Event {
	name, _, _ := strings.Cut(r.Target, "@")
	return newEvent(r.Tenant, ReplayCompleted, name, r.WorkflowID, r.CreatedAt, replayData{
		ReplayID: r.ID, WorkflowID: r.WorkflowID, Target: r.Target, DryRun: r.DryRun, OriginalVersion: r.OriginalVersion,
		OriginalOutcome: r.OriginalOutcome, ReplayOutcome: r.ReplayOutcome, ReplayError: r.ReplayError, Delta: r.Delta,
		ReplayWorkflowID: r.ReplayWorkflowID, CreatedAt: r.CreatedAt})
}

// BatchDone is the event of a replay batch that ended: replay_batch.completed,
// for any final status (the data says which).
func BatchDone(tenant, id, target, status, errMsg string, at time.Time) *Event {
	name, _, _ := strings.Cut(target, "@")
	return newEvent(tenant, ReplayBatchCompleted, name, id, at, map[string]any{
		"batch_id": id, "target_agent_version": target, "status": status, "error": errMsg, "finished_at": at.UTC()})
}

// Drifted is the event of a stored revision of a tool's description that
// drifted (tool.Refresh.Drifted): tool.drifted with its diff, ordered with
// the tool's other revisions.
func Drifted(r *tool.Refresh) *Event {
	return newEvent(r.Tenant, ToolDrifted, "", r.ToolID, r.CreatedAt, map[string]any{
		"tool_id": r.ToolID, "tool": r.ToolName, "revision": r.N, "status": r.Status, "base_revision": r.BaseRevision,
		"tool_revision": r.ToolRevision, "breaking": r.Diff.Breaking(), "diff": r.Diff, "created_at": r.CreatedAt.UTC()})
}
