// Package storetest is the one conformance suite every store engine runs:
// tools, tenant isolation, the audit chain (including under concurrency and
// tampering), idempotency, signing keys, clients, server secrets, agent
// versions, workflows with their leases, and replays. Each engine's own
// test calls Run with a function that opens a fresh store.
package storetest

import (
	"context"
	"fmt"
	"github.com/agentplane/agentplane/internal/catalogcache"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/auth/session"
	"github.com/agentplane/agentplane/internal/idempotency"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/retention"
	"github.com/agentplane/agentplane/internal/rollout"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/siem"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/impact"
	"github.com/agentplane/agentplane/internal/webhook"
	"github.com/agentplane/agentplane/internal/workflow"
)

// Store is everything an engine's DB provides.
type Store interface {
	audit.Store
	// AppendAuditLater appends records with the next write committed.
	AppendAuditLater(done func(error), recs ...*audit.Record)
	auth.Store
	auth.RevocationStore
	idempotency.Store
	tool.Store
	impact.Store
	model.Store
	agent.VersionStore
	workflow.Store
	replay.Store
	replay.BatchStore
	replay.DatasetStore
	schedule.Store
	webhook.Store
	rollout.Store
	retention.Store
	retention.WriteCounter
	siem.Store
	redact.KeyStore
	session.Store
	catalogcache.Generations
	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
}

// Hooks reach behind the store's API, for what only raw SQL can do.
type Hooks struct {
	// TamperAudit changes a stored field of the tenant's record seq (the
	// action, say) without touching its hash.
	TamperAudit func(t *testing.T, s Store, tenant string, seq int64)
	// UseTool records that an agent version names a tool
	// (agent_version_tools), which blocks deleting it.
	UseTool func(t *testing.T, s Store, tenant, agent, version, toolName string)
}

// Run runs the suite; open returns a new, empty, migrated store that is
// closed when t ends. Tests needing a hook that h lacks are skipped.
func Run(t *testing.T, open func(t *testing.T) Store, h Hooks) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store, h Hooks)
	}{
		{"Ping", testPing},
		{"CatalogGeneration", testCatalogGeneration},
		{"ToolCRUD", testToolCRUD},
		{"ToolNameConflict", testToolNameConflict},
		{"ToolTenantIsolation", testToolTenantIsolation},
		{"ToolList", testToolList},
		{"ToolOperations", testToolOperations},
		{"ToolDeleteInUse", testToolDeleteInUse},
		{"ToolRevisions", testToolRevisions},
		{"ToolRefreshes", testToolRefreshes},
		{"ToolImpactReads", testToolImpactReads},
		{"ToolRefreshSchedule", testToolRefreshSchedule},
		{"ModelCRUD", testModelCRUD},
		{"ModelNameConflict", testModelNameConflict},
		{"ModelTenantIsolation", testModelTenantIsolation},
		{"ModelList", testModelList},
		{"ModelDeleteInUse", testModelDeleteInUse},
		{"AuditAppendQuery", testAuditAppendQuery},
		{"AuditFilters", testAuditFilters},
		{"AuditCursor", testAuditCursor},
		{"AuditWithMutations", testAuditWithMutations},
		{"AuditConcurrent", testAuditConcurrent},
		{"AuditLater", testAuditLater},
		{"AuditTamper", testAuditTamper},
		{"AuditUnstorableText", testAuditUnstorableText},
		{"AuditSinks", testAuditSinks},
		{"Idempotency", testIdempotency},
		{"IdempotencyExpiryTakeover", testIdempotencyExpiryTakeover},
		{"IdempotencyConcurrent", testIdempotencyConcurrent},
		{"SigningKeys", testSigningKeys},
		{"Clients", testClients},
		{"ClientRevocation", testClientRevocation},
		{"ServerSecrets", testServerSecrets},
		{"RedactionKeys", testRedactionKeys},
		{"AgentDeploy", testAgentDeploy},
		{"AgentExternalVersion", testAgentExternalVersion},
		{"AgentAutoVersion", testAgentAutoVersion},
		{"AgentVersionConflict", testAgentVersionConflict},
		{"AgentSetDefault", testAgentSetDefault},
		{"AgentNotFound", testAgentNotFound},
		{"AgentTenantIsolation", testAgentTenantIsolation},
		{"AgentList", testAgentList},
		{"AgentToolInUse", testAgentToolInUse},
		{"AgentConcurrentDeploy", testAgentConcurrentDeploy},
		{"AgentArchiveVersion", testAgentArchiveVersion},
		{"AgentArchiveWhole", testAgentArchiveWhole},
		{"WorkflowLifecycle", testWorkflowLifecycle},
		{"IntentsEndWithTheirCall", testIntentsEndWithTheirCall},
		{"WorkflowAppendSteps", testWorkflowAppendSteps},
		{"WorkflowExternalSteps", testWorkflowExternalSteps},
		{"WorkflowFaults", testWorkflowFaults},
		{"WorkflowFinishWithLastSteps", testWorkflowFinishWithLastSteps},
		{"WorkflowLeaseEnforced", testWorkflowLeaseEnforced},
		{"WorkflowRenewCancelRelease", testWorkflowRenewCancelRelease},
		{"WorkflowClaimExpired", testWorkflowClaimExpired},
		{"WorkflowClaimConcurrent", testWorkflowClaimConcurrent},
		{"WorkflowList", testWorkflowList},
		{"StepCompletion", testStepCompletion},
		{"WorkflowListDenseWords", testWorkflowListDenseWords},
		{"WorkflowKeys", testWorkflowKeys},
		{"CompletionUsage", testCompletionUsage},
		{"RecordUsage", testRecordUsage},
		{"ApprovalLifecycle", testApprovalLifecycle},
		{"ApprovalDecideConcurrent", testApprovalDecideConcurrent},
		{"ApprovalCancelWaiting", testApprovalCancelWaiting},
		{"ApprovalList", testApprovalList},
		{"BudgetApproval", testBudgetApproval},
		{"Rollouts", testRollouts},
		{"ReplayRoundTrip", testReplayRoundTrip},
		{"ReplayTenantIsolation", testReplayTenantIsolation},
		{"ReplayList", testReplayList},
		{"BatchLifecycle", testBatchLifecycle},
		{"BatchLeases", testBatchLeases},
		{"BatchCounters", testBatchCounters},
		{"ListBatches", testListBatches},
		{"BatchChecks", testBatchChecks},
		{"DatasetVersions", testDatasetVersions},
		{"DatasetList", testDatasetList},
		{"LiveBatch", testLiveBatch},
		{"ScheduleCRUD", testScheduleCRUD},
		{"ScheduleClaims", testScheduleClaims},
		{"SchedulePause", testSchedulePause},
		{"WebhookOutbox", testWebhookOutbox},
		{"WebhookCRUD", testWebhookCRUD},
		{"WebhookReplayEvents", testWebhookReplayEvents},
		{"ReplayRunning", testReplayRunning},
		{"RetentionSweep", testRetentionSweep},
		{"DeleteWorkflow", testDeleteWorkflow},
		{"RetentionLease", testRetentionLease},
		{"CommittedWrites", testCommittedWrites},
		{"AuditTrim", testAuditTrim},
		{"ConsoleGrants", testConsoleGrants},
		{"ConsoleSessions", testConsoleSessions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t), h)
		})
	}
}

// base is a fixed time, microsecond-exact as stores keep it.
var base = time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails t unless err carries code.
func wantCode(t *testing.T, err error, code problem.Code, what string) {
	t.Helper()
	if !problem.Is(err, code) {
		t.Fatalf("%s: err = %v, want %s", what, err, code)
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func testPing(t *testing.T, s Store, _ Hooks) {
	must(t, s.Ping(ctxOf(t)), "ping")
}

func record(tenant, action string, i int) *audit.Record {
	return &audit.Record{
		Time:     base.Add(time.Duration(i) * time.Second),
		Tenant:   tenant,
		Actor:    audit.Actor{Sub: "user-1", ClientID: "cli-1"},
		Action:   action,
		Resource: audit.Resource{Type: "tool", ID: fmt.Sprintf("tool_%d", i)},
		Outcome:  audit.Success, Status: 200,
		RequestID: fmt.Sprintf("req_%d", i), TraceID: fmt.Sprintf("trace-%d", i),
		Details: audit.Details(map[string]any{"i": i}),
	}
}
