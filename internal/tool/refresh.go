package tool

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
)

// Statuses of a refresh (SPEC §4 "Tool drift").
const (
	// RefreshUnchanged: the description's operations are as indexed;
	// nothing is stored.
	RefreshUnchanged = "unchanged"
	// RefreshApplied: the tool's operations were replaced by the refresh's.
	RefreshApplied = "applied"
	// RefreshPending: a breaking refresh waits for POST …/revisions/{n}/apply.
	RefreshPending = "pending"
	// RefreshSuperseded: a pending refresh a later one replaced.
	RefreshSuperseded = "superseded"
)

// Refresh is one fetch of a tool's description that differed from the
// operations indexed: revision N of the tool's description, numbered per
// tool from 1.
type Refresh struct {
	Tenant string `json:"-"`
	ToolID string `json:"-"`
	// ToolName names the tool in the tool.drifted event; it is not stored.
	ToolName string `json:"-"`
	N        int    `json:"revision"`
	Status   string `json:"status"`
	// BaseRevision is the tool's revision the diff was taken against; a
	// pending refresh applies only while the tool is still at it.
	BaseRevision int `json:"base_revision"`
	// ToolRevision is the tool's revision the refresh made, once applied.
	ToolRevision int        `json:"tool_revision,omitempty"`
	Diff         Diff       `json:"diff"`
	CreatedAt    time.Time  `json:"created_at"`
	AppliedAt    *time.Time `json:"applied_at,omitempty"`
	// What the tool takes from the new description when it is applied.
	SpecSHA256   string `json:"spec_sha256"`
	BaseURL      string `json:"-"`
	SpecTokenURL string `json:"-"`
}

// Drifted reports whether r is drift a tool.drifted event reports: its
// operations differ, or it waits for a person (a moved server does, with
// operations that did not change). A description changed in its wording
// alone is applied with an empty diff and reports nothing.
func (r *Refresh) Drifted() bool { return !r.Diff.Empty() || r.Status == RefreshPending }

// RefreshStore keeps a tool's refreshes.
type RefreshStore interface {
	// AddToolRefresh stores r and assigns r.N. A pending r supersedes the
	// tool's earlier pending refreshes and keeps ops for its apply. With t
	// (an applied r) it also replaces the tool and its operations by t and
	// ops as UpdateTool does, in the same transaction. problem.Conflict
	// when the tool is no longer at r.BaseRevision.
	AddToolRefresh(ctx context.Context, r *Refresh, t *Tool, ops []Operation, rec *audit.Record) error
	// ToolRefreshes lists a tool's refreshes, newest first; problem.NotFound
	// for an unknown tool.
	ToolRefreshes(ctx context.Context, tenant, toolID string) ([]*Refresh, error)
	// ToolRefresh returns refresh n with the operations kept for it (none
	// once it is no longer pending), or problem.NotFound.
	ToolRefresh(ctx context.Context, tenant, toolID string, n int) (*Refresh, []Operation, error)
	// ApplyToolRefresh replaces the tool by t and ops and marks refresh n
	// applied at t.UpdatedAt with t's revision; problem.Conflict when n is
	// no longer pending or the tool is no longer at its base revision.
	ApplyToolRefresh(ctx context.Context, t *Tool, n int, ops []Operation, rec *audit.Record) error
	// DueToolRefreshes returns up to limit tools, of every tenant, whose
	// scheduled refresh is due at now, each with RefreshDue set. A tool's
	// first refresh is due its refresh after it was created or its refresh
	// last changed.
	DueToolRefreshes(ctx context.Context, now time.Time, limit int) ([]*Tool, error)
	// ClaimToolRefresh moves a tool's next scheduled refresh from due to
	// next; false when it was no longer at due (another replica claimed it,
	// or the tool changed).
	ClaimToolRefresh(ctx context.Context, tenant, id string, due, next time.Time) (bool, error)
}

// RefreshResult is the answer to a refresh.
type RefreshResult struct {
	// Revision is the refresh's number; 0 (left out) when unchanged.
	Revision     int    `json:"revision,omitempty"`
	ToolRevision int    `json:"tool_revision"`
	Status       string `json:"status"`
	Diff         Diff   `json:"diff"`
	Breaking     bool   `json:"breaking"`
}

// registrationOf is the registration a tool was indexed with, as far as it
// is kept: operation_kinds are not, and the kinds of the operations kept
// from the current revision carry them over (see Refresh).
func registrationOf(t *Tool) Registration {
	auth := t.Auth
	return Registration{Name: t.Name, Type: t.Type, SpecURL: t.SpecURL, EndpointURL: t.EndpointURL,
		Auth: &auth, PolicyClass: t.PolicyClass, SideEffects: t.SideEffects, IdempotencySupport: t.IdempotencySupport,
		Limits: t.Limits, Redact: t.Redact, Refresh: t.Refresh}
}

// Refresh fetches a tool's spec_url again, under the rules of registration,
// and compares its operations with the tool's: a change that breaks no
// caller is applied at once (the tool's revision goes up), a breaking one is
// kept pending until ApplyRefresh. A description that cannot be fetched or
// imported changes nothing and answers why.
func (s *Service) Refresh(ctx context.Context, tenant, id string, rec *audit.Record) (*RefreshResult, error) {
	old, err := s.Store.Tool(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if old.SpecURL == "" {
		return nil, problem.Field("spec_url", "tool %q was registered from an inline spec: a refresh fetches spec_url again, so register it with spec_url (or update it with PUT /v1/tools/{id} and the new spec)", old.Name)
	}
	oldOps, err := s.Store.Operations(ctx, tenant, id, "")
	if err != nil {
		return nil, err
	}
	now := s.Now().UTC()
	t := &Tool{ID: old.ID, Tenant: tenant, Revision: old.Revision + 1, CreatedAt: old.CreatedAt}
	ops, size, err := s.index(ctx, t, registrationOf(old), now)
	if err != nil {
		return nil, err
	}
	defer releaseMemory(size)
	keepKinds(oldOps, ops)
	t.OperationLimits = keptLimits(old.OperationLimits, ops)
	d := DiffOperations(oldOps, ops)
	res := &RefreshResult{ToolRevision: old.Revision, Status: RefreshUnchanged, Diff: d, Breaking: d.Breaking()}
	if d.Empty() && t.SpecSHA256 == old.SpecSHA256 {
		return res, nil
	}
	r := &Refresh{Tenant: tenant, ToolID: id, ToolName: old.Name, BaseRevision: old.Revision, Diff: d, CreatedAt: now,
		SpecSHA256: t.SpecSHA256, BaseURL: t.BaseURL, SpecTokenURL: t.SpecTokenURL}
	if rec != nil {
		rec.Resource = audit.Resource{Type: "tool", ID: id}
	}
	// A description that sends the tool's calls, or its OAuth client's
	// credentials, to another host waits for a person to apply it, as a
	// breaking one does: the tool's secrets would follow it.
	if res.Breaking || otherHost(old.BaseURL, t.BaseURL) || otherHost(old.SpecTokenURL, t.SpecTokenURL) {
		r.Status = RefreshPending
		if err := s.Store.AddToolRefresh(ctx, r, nil, ops, rec); err != nil {
			return nil, err
		}
		res.Revision, res.Status = r.N, RefreshPending
		return res, nil
	}
	r.Status, r.ToolRevision, r.AppliedAt = RefreshApplied, t.Revision, &now
	if err := s.Store.AddToolRefresh(ctx, r, t, ops, rec); err != nil {
		return nil, err
	}
	s.forget(id)
	res.Revision, res.ToolRevision, res.Status = r.N, t.Revision, RefreshApplied
	return res, nil
}

// otherHost reports whether URL b names another scheme, host or port
// than URL a.
func otherHost(a, b string) bool {
	if a == b {
		return false
	}
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	return errA != nil || errB != nil || ua.Scheme != ub.Scheme || ua.Host != ub.Host
}

// ApplyRefresh applies pending refresh n of a tool: its operations replace
// the tool's, whose revision goes up. problem.NotFound for an unknown n,
// problem.Conflict for one no longer pending or taken against a revision
// the tool has since left.
func (s *Service) ApplyRefresh(ctx context.Context, tenant, id string, n int, rec *audit.Record) (*Refresh, error) {
	r, ops, err := s.Store.ToolRefresh(ctx, tenant, id, n)
	if err != nil {
		return nil, err
	}
	if r.Status != RefreshPending {
		return nil, problem.New(problem.Conflict, "revision %d of tool %s is %s, not pending: only a pending revision is applied", n, id, r.Status)
	}
	cur, err := s.Store.Tool(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if cur.Revision != r.BaseRevision {
		return nil, problem.New(problem.Conflict, "revision %d was compared with the tool's revision %d, and the tool is now at %d: refresh again (POST /v1/tools/%s/refresh)", n, r.BaseRevision, cur.Revision, id)
	}
	now := s.Now().UTC()
	t := *cur
	t.Tenant, t.Revision = tenant, cur.Revision+1
	t.SpecSHA256, t.BaseURL, t.SpecTokenURL = r.SpecSHA256, r.BaseURL, r.SpecTokenURL
	t.OperationCount, t.OperationLimits = len(ops), keptLimits(cur.OperationLimits, ops)
	t.IndexedAt, t.UpdatedAt = now, now
	if cur.EndpointURL != "" {
		t.BaseURL = cur.EndpointURL
	}
	if rec != nil {
		rec.Resource = audit.Resource{Type: "tool", ID: id}
	}
	if err := s.Store.ApplyToolRefresh(ctx, &t, n, ops, rec); err != nil {
		return nil, err
	}
	s.forget(id)
	r.Status, r.ToolRevision, r.AppliedAt = RefreshApplied, t.Revision, &now
	return r, nil
}

// Refreshes lists a tool's refreshes, newest first.
func (s *Service) Refreshes(ctx context.Context, tenant, id string) ([]*Refresh, error) {
	return s.Store.ToolRefreshes(ctx, tenant, id)
}

// keepKinds gives each new operation also in the current revision, bound
// to the same method, the current one's kind: the kinds a registration's
// operation_kinds overrode are kept across refreshes.
func keepKinds(old, ops []Operation) {
	byID := make(map[string]*Operation, len(old))
	for i := range old {
		byID[old[i].ID] = &old[i]
	}
	for i := range ops {
		o, ok := byID[ops[i].ID]
		if ok && (o.HTTP == nil || ops[i].HTTP == nil || o.HTTP.Method == ops[i].HTTP.Method) {
			ops[i].Kind = o.Kind
		}
	}
}

// keptLimits are the operation limits of the operations still defined.
func keptLimits(limits map[string]Limits, ops []Operation) map[string]Limits {
	if len(limits) == 0 {
		return limits
	}
	kept := make(map[string]Limits, len(limits))
	for i := range ops {
		if l, ok := limits[ops[i].ID]; ok {
			kept[ops[i].ID] = l
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

// RevisionOperations returns a tool, its refresh n and the operations the
// refresh brings: those kept for it while pending, the tool's own while it
// is still at the revision the refresh made, else that revision's
// snapshot. problem.NotFound for an unknown n, problem.Conflict for a
// superseded revision or an applied one whose operations are no longer kept.
func (s *Service) RevisionOperations(ctx context.Context, tenant, id string, n int) (*Tool, *Refresh, []Operation, error) {
	t, err := s.Store.Tool(ctx, tenant, id)
	if err != nil {
		return nil, nil, nil, err
	}
	r, ops, err := s.Store.ToolRefresh(ctx, tenant, id, n)
	if err != nil {
		return nil, nil, nil, err
	}
	switch {
	case r.Status == RefreshPending:
		return t, r, ops, nil
	case r.Status != RefreshApplied:
		return nil, nil, nil, problem.New(problem.Conflict, "revision %d of tool %s is %s: a later refresh replaced it (GET /v1/tools/%s/revisions lists them)", n, id, r.Status, id)
	case t.Revision == r.ToolRevision:
		ops, err = s.Store.Operations(ctx, tenant, id, "")
		return t, r, ops, err
	}
	_, ops, err = s.Store.ToolRevision(ctx, tenant, t.Name, r.ToolRevision)
	if problem.Is(err, problem.NotFound) {
		return nil, nil, nil, problem.New(problem.Conflict, "revision %d of tool %s made the tool's revision %d, which the tool has left (it is at %d) and which is no longer kept: ask the impact of a later revision", n, id, r.ToolRevision, t.Revision)
	}
	return t, r, ops, err
}

// MinRefresh is the shortest scheduled refresh a tool may carry.
const MinRefresh = time.Hour

// RefreshEvery is how often the tool is refreshed on schedule; 0 for never.
func (t *Tool) RefreshEvery() time.Duration {
	d, err := time.ParseDuration(t.Refresh)
	if err != nil || d < MinRefresh {
		return 0
	}
	return d
}

// RefreshActor is the audit actor of the refreshes the scheduler makes.
var RefreshActor = audit.Actor{Sub: "agentplane:scheduler"}

// maxDueRefreshes bounds the tools one pass refreshes.
const maxDueRefreshes = 100

// RunScheduledRefreshes refreshes, every tick until ctx is done, the tools
// whose scheduled refresh is due. Every replica runs it; a tool's due time
// is claimed in the store first, so one replica refreshes it. A refresh
// that fails is logged and tried again at the tool's next due time.
func (s *Service) RunScheduledRefreshes(ctx context.Context, tick time.Duration, logger *slog.Logger) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if err := s.RefreshDue(ctx, logger); err != nil && ctx.Err() == nil {
			logger.Warn("scheduled tool refreshes failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RefreshDue refreshes the tools whose scheduled refresh is due now and
// that this call claims.
func (s *Service) RefreshDue(ctx context.Context, logger *slog.Logger) error {
	now := s.Now().UTC()
	due, err := s.Store.DueToolRefreshes(ctx, now, maxDueRefreshes)
	if err != nil {
		return err
	}
	for _, t := range due {
		won, err := s.Store.ClaimToolRefresh(ctx, t.Tenant, t.ID, t.RefreshDue, now.Add(t.RefreshEvery()))
		if err != nil {
			return err
		}
		if !won {
			continue
		}
		rec := &audit.Record{Tenant: t.Tenant, Time: now, Actor: RefreshActor, Action: "tool.refresh", Outcome: audit.Success, Status: 200}
		res, err := s.Refresh(ctx, t.Tenant, t.ID, rec)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logger.Warn("scheduled tool refresh failed", "tenant", t.Tenant, "tool_id", t.ID, "tool", t.Name, "error", err)
			continue
		}
		logger.Info("scheduled tool refresh", "tenant", t.Tenant, "tool_id", t.ID, "tool", t.Name, "status", res.Status, "revision", res.Revision)
	}
	return nil
}
