package workflow

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
)

// ParseListFilter reads a workflow list's filters from a query (the
// API's and the console's): a problem.ValidationFailed names each field
// that is wrong.
func ParseListFilter(q url.Values) (ListFilter, error) {
	f := ListFilter{Agent: q.Get("agent"), Version: q.Get("version"), Status: q.Get("status"), Outcome: q.Get("outcome"), Before: q.Get("cursor")}
	var errs []problem.FieldError
	if f.Version != "" {
		if n, err := strconv.Atoi(f.Version); err != nil || n < 1 || strconv.Itoa(n) != f.Version {
			errs = append(errs, problem.FieldError{Field: "version", Message: "must be a version number such as 3"})
		} else if f.Agent == "" {
			errs = append(errs, problem.FieldError{Field: "version", Message: "needs agent: a version number belongs to one agent"})
		}
	}
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		errs = append(errs, problem.As(err).Errors...)
	}
	f.Limit = limit
	for _, t := range []struct {
		name string
		out  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			tm, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				errs = append(errs, problem.FieldError{Field: t.name, Message: "must be an RFC 3339 time"})
			}
			*t.out = tm
		}
	}
	f.Words = strings.Fields(q.Get("q"))
	if len(f.Words) > MaxFilterWords {
		errs = append(errs, problem.FieldError{Field: "q", Message: fmt.Sprintf("has %d words, more than %d", len(f.Words), MaxFilterWords)})
	}
	for k, vs := range q {
		key, ok := strings.CutPrefix(k, "context.")
		if !ok {
			continue
		}
		if key == "" || len(vs) != 1 {
			errs = append(errs, problem.FieldError{Field: k, Message: "give one context.<key>=<value> per key"})
			continue
		}
		if f.Context == nil {
			f.Context = map[string]string{}
		}
		f.Context[key] = vs[0]
	}
	if len(f.Context) > MaxContextFilters {
		errs = append(errs, problem.FieldError{Field: "context", Message: fmt.Sprintf("filters on %d keys, more than %d", len(f.Context), MaxContextFilters)})
	}
	switch f.Status {
	case "", Running, Waiting, Completed, Failed, Cancelled:
	default:
		errs = append(errs, problem.FieldError{Field: "status", Message: "must be running, waiting, completed, failed or cancelled"})
	}
	if len(errs) > 0 {
		return f, problem.Validation(errs...)
	}
	return f, nil
}
