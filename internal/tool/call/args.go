package call

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// prepare builds the request of req's operation from its binding and args.
func (e *Executor) prepare(req tool.CallRequest) (*prepared, error) {
	op := req.Operation
	switch {
	case op.HTTP != nil:
		return e.prepareHTTP(req.Tool, op, req.Args)
	case op.GraphQL != nil:
		return prepareGraphQL(req.Tool, op, req.Args)
	case op.SOAP != nil:
		return prepareSOAP(req.Tool, op, req.Args)
	case op.A2A != nil:
		return prepareA2A(req)
	default:
		return nil, fmt.Errorf("operation %s of tool %s has no binding", op.ID, req.Tool.ID)
	}
}

// argErrors collects what is wrong with a call's arguments.
type argErrors []problem.FieldError

func (a *argErrors) add(field, format string, args ...any) {
	*a = append(*a, problem.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// missing records a required argument that is absent.
func (a *argErrors) missing(name, what string) {
	a.add(name, "is required (%s)", what)
}

// unknown records every argument not in used, in name order.
func (a *argErrors) unknown(args map[string]any, used map[string]bool, opID string) {
	var names []string
	for k := range args {
		if !used[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		a.add(k, "is not an argument of operation %s", opID)
	}
}

func (a argErrors) err() error {
	if len(a) == 0 {
		return nil
	}
	return problem.Validation(a...)
}

// present returns an argument that is set (not absent and not null).
func present(args map[string]any, name string) (any, bool) {
	v, ok := args[name]
	return v, ok && v != nil
}

// scalar writes a JSON scalar as text; objects and arrays as JSON.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case json.Number:
		return v.String()
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}

// scalars is a parameter's values: one per item of an array (the OpenAPI
// form style with explode, the default for query parameters).
func scalars(v any) []string {
	items, ok := v.([]any)
	if !ok {
		return []string{scalar(v)}
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, scalar(it))
	}
	return out
}

// baseURL parses the URL calls of t go to.
func baseURL(t *tool.Tool, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, problem.Field("endpoint_url", "tool %s has no address to call: register it with endpoint_url", t.Name)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, problem.Field("endpoint_url", "tool %s has an address that is not an absolute URL", t.Name)
	}
	return u, nil
}
