package audit

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/problem"
)

// Query is an audit query as a client asks it: the body of POST
// /v1/audit/query and the parameters of GET (QueryParams). Filter checks
// it and turns it into the Filter a Store queries with.
type Query struct {
	Actor        string `json:"actor,omitempty"`
	Action       string `json:"action,omitempty"`
	ResourceType string `json:"resource_type,omitempty"`
	ResourceID   string `json:"resource_id,omitempty"`
	WorkflowID   string `json:"workflow_id,omitempty"`
	Outcome      string `json:"outcome,omitempty"`
	Since        string `json:"since,omitempty"`
	Until        string `json:"until,omitempty"`
	TraceID      string `json:"trace_id,omitempty"`
	Limit        int    `json:"limit,omitempty"`
	Cursor       string `json:"cursor,omitempty"`
}

// QueryParams are the parameters a query string may hold.
var QueryParams = []string{"actor", "action", "resource_type", "resource_id", "workflow_id", "outcome", "since", "until", "trace_id", "limit", "cursor"}

// FromValues reads q from a query string; a parameter it does not know
// is refused.
func (q *Query) FromValues(v url.Values) error {
	for k := range v {
		if !slices.Contains(QueryParams, k) {
			return problem.Field(k, "unknown query parameter; known: %s", strings.Join(QueryParams, ", "))
		}
	}
	q.Actor, q.Action = v.Get("actor"), v.Get("action")
	q.ResourceType, q.ResourceID = v.Get("resource_type"), v.Get("resource_id")
	q.WorkflowID, q.Outcome, q.TraceID = v.Get("workflow_id"), v.Get("outcome"), v.Get("trace_id")
	q.Since, q.Until, q.Cursor = v.Get("since"), v.Get("until"), v.Get("cursor")
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return problem.Field("limit", "must be an integer from 1 to %d", MaxLimit)
		}
		q.Limit = n
	}
	return nil
}

// Filter checks q and returns the Filter it asks for; a
// problem.ValidationFailed names each field that is wrong.
func (q Query) Filter() (Filter, error) {
	var errs []problem.FieldError
	f := Filter{
		Actor: q.Actor, Action: q.Action, ResourceType: q.ResourceType, ResourceID: q.ResourceID,
		WorkflowID: q.WorkflowID, Outcome: q.Outcome, TraceID: q.TraceID, Limit: q.Limit,
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit < 1 || f.Limit > MaxLimit {
		errs = append(errs, problem.FieldError{Field: "limit", Message: "must be from 1 to 1000"})
	}
	if f.Outcome != "" && f.Outcome != Success && f.Outcome != Denied && f.Outcome != Error {
		errs = append(errs, problem.FieldError{Field: "outcome", Message: "must be success, denied or error"})
	}
	for _, t := range []struct {
		name string
		in   string
		out  *time.Time
	}{{"since", q.Since, &f.Since}, {"until", q.Until, &f.Until}} {
		if t.in == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.in)
		if err != nil {
			errs = append(errs, problem.FieldError{Field: t.name, Message: "must be an RFC 3339 time such as 2026-11-21T10:00:00Z"})
			continue
		}
		*t.out = v
	}
	if q.Cursor != "" {
		seq, err := decodeCursor(q.Cursor)
		if err != nil {
			errs = append(errs, problem.FieldError{Field: "cursor", Message: "is not a cursor this endpoint returned"})
		}
		f.BeforeSeq = seq
	}
	if len(errs) > 0 {
		return f, problem.Validation(errs...)
	}
	return f, nil
}

// EncodeCursor is the cursor of the page that follows the record seq.
func EncodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("s" + strconv.FormatInt(seq, 10)))
}

func decodeCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != 's' {
		return 0, problem.New(problem.ValidationFailed, "bad cursor")
	}
	return strconv.ParseInt(string(b[1:]), 10, 64)
}
