package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/internal/workflow"
)

// listCase is one list the console asks for.
type listCase struct {
	name   string
	filter workflow.ListFilter
}

// casesOf are the lists timed on the seeded db: a later page starts half
// way down the list.
func casesOf(_ context.Context, db *benchDB) ([]listCase, error) {
	if len(db.ids) < 2*pageSize {
		return nil, fmt.Errorf("%d workflows seeded, fewer than two pages", len(db.ids))
	}
	page := func(f workflow.ListFilter) workflow.ListFilter { f.Limit = pageSize; return f }
	return []listCase{
		{"first page", page(workflow.ListFilter{})},
		{"a later page", page(workflow.ListFilter{Before: db.ids[len(db.ids)/2]})},
		{"agent and version", page(workflow.ListFilter{Agent: "triage", Version: "2"})},
		{"status failed", page(workflow.ListFilter{Status: workflow.Failed})},
		{"goal: refund (1 in 5)", page(workflow.ListFilter{Words: []string{"refund"}})},
		{"goal: refund duplicate", page(workflow.ListFilter{Words: []string{"refund", "duplicate"}})},
		{"goal: chargeback (1 in 200)", page(workflow.ListFilter{Words: []string{"chargeback"}})},
		{"goal: chargeback, a later page", page(workflow.ListFilter{Words: []string{"chargeback"}, Before: db.ids[len(db.ids)/2]})},
		{"goal: no match", page(workflow.ListFilter{Words: []string{"zzyzx"}})},
	}, nil
}

// query is f as GET /v1/workflows' query string.
func query(f workflow.ListFilter) string {
	q := url.Values{}
	for k, v := range map[string]string{"agent": f.Agent, "version": f.Version, "status": f.Status, "cursor": f.Before,
		"q": strings.Join(f.Words, " "), "limit": fmt.Sprint(f.Limit)} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

type caseResult struct {
	name        string
	rows        int
	store, http benchserver.Latencies
	plan        []string
}

type storeResult struct {
	store  string
	seeded time.Duration
	cases  []caseResult
}

// measureCase times requests lists of cs through the store and through the
// server, alternating, after 10 untimed of each; both must return the same
// workflows.
func measureCase(ctx context.Context, requests int, db *benchDB, srv *benchserver.Server, cs listCase) (caseResult, error) {
	r := caseResult{name: cs.name}
	var err error
	if r.plan, err = db.ListWorkflowsPlan(ctx, tenant, cs.filter); err != nil {
		return r, err
	}
	path := "/v1/workflows?" + query(cs.filter)
	for i := range requests + 10 {
		start := time.Now()
		wfs, err := db.ListWorkflows(ctx, tenant, cs.filter)
		took := time.Since(start)
		if err != nil {
			return r, err
		}
		start = time.Now()
		status, body, err := srv.Do(ctx, http.MethodGet, path, nil)
		tookHTTP := time.Since(start)
		if err != nil {
			return r, err
		}
		if status != http.StatusOK {
			return r, fmt.Errorf("GET %s: %d %.300s", path, status, body)
		}
		var list struct {
			Workflows []struct {
				ID string `json:"workflow_id"`
			} `json:"workflows"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return r, fmt.Errorf("GET %s: %w", path, err)
		}
		if len(list.Workflows) != len(wfs) || (len(wfs) > 0 && list.Workflows[0].ID != wfs[0].ID) {
			return r, fmt.Errorf("GET %s: %d workflows, the store %d", path, len(list.Workflows), len(wfs))
		}
		r.rows = len(wfs)
		if i >= 10 {
			r.store, r.http = append(r.store, took), append(r.http, tookHTTP)
		}
	}
	return r, nil
}
