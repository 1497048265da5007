package call

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// prepareHTTP builds the request of an OpenAPI operation: path, query and
// header parameters by name; the remaining arguments form the JSON body, or
// the single argument "body" holds the whole body.
func (e *Executor) prepareHTTP(t *tool.Tool, op *tool.Operation, args map[string]any) (*prepared, error) {
	b := op.HTTP
	base, err := baseURL(t, t.BaseURL)
	if err != nil {
		return nil, err
	}
	var errs argErrors
	used := map[string]bool{}
	path := b.Path
	query := base.Query()
	header := http.Header{}
	for _, p := range b.Params {
		used[p.Name] = true
		v, ok := present(args, p.Name)
		if !ok {
			if p.Required || p.In == "path" {
				errs.missing(p.Name, p.In+" parameter")
			}
			continue
		}
		switch p.In {
		case "path":
			path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(strings.Join(scalars(v), ",")))
		case "query":
			for _, s := range scalars(v) {
				query.Add(p.Name, s)
			}
		case "header":
			header.Set(p.Name, strings.Join(scalars(v), ","))
		case "cookie":
			header.Add("Cookie", (&http.Cookie{Name: p.Name, Value: scalar(v)}).String())
		}
	}

	var rest []string
	for k := range args {
		if !used[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	p := &prepared{method: strings.ToUpper(b.Method), header: header, read: readHTTP}
	switch {
	case b.Body == nil:
		errs.unknown(args, used, op.ID)
	case len(rest) == 0:
		if b.Body.Required {
			errs.missing("body", "request body")
		}
	default:
		var body any
		if len(rest) == 1 && rest[0] == "body" && !hasProperty(b.Body.Schema, "body") {
			body = args["body"]
		} else {
			m := make(map[string]any, len(rest))
			for _, k := range rest {
				m[k] = args[k]
			}
			body = m
		}
		key := schemaKey{tool: t.ID, revision: t.Revision, operation: op.ID, which: "body"}
		if err := e.encodeBody(p, key, b.Body, body, &errs); err != nil {
			return nil, err
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}

	full := strings.TrimSuffix(base.EscapedPath(), "/") + "/" + strings.TrimPrefix(pathOnly(path), "/")
	pu, err := url.Parse(full)
	if err != nil {
		return nil, problem.Field("path", "the operation's path %q cannot be built into a URL", b.Path)
	}
	u := *base
	u.Path, u.RawPath = pu.Path, pu.RawPath
	u.RawQuery = query.Encode()
	p.url = &u
	if header.Get("Accept") == "" {
		header.Set("Accept", "application/json")
	}
	return p, nil
}

// pathOnly drops a query or fragment a spec wrote into a path template.
func pathOnly(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return p[:i]
	}
	return p
}

// encodeBody validates body against the operation's schema, which key
// names, and encodes it in the body's content type: JSON, a form, or a
// string sent as is.
func (e *Executor) encodeBody(p *prepared, key schemaKey, b *tool.Body, body any, errs *argErrors) error {
	ct := b.ContentType
	if ct == "" {
		ct = "application/json"
	}
	mt, _, _ := mime.ParseMediaType(ct)
	p.header.Set("Content-Type", ct)
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		data, err := json.Marshal(body)
		if err != nil {
			errs.add("body", "cannot be encoded as JSON")
			return nil
		}
		*errs = append(*errs, e.schema.validate(key, b.Schema, data)...)
		p.body, p.recordBody = data, data
	case mt == "application/x-www-form-urlencoded":
		m, ok := body.(map[string]any)
		if !ok {
			errs.add("body", "must be an object for %s", mt)
			return nil
		}
		form := url.Values{}
		for k, v := range m {
			for _, s := range scalars(v) {
				form.Add(k, s)
			}
		}
		p.body = []byte(form.Encode())
		p.recordBody = jsonString(string(p.body))
	default:
		s, ok := body.(string)
		if !ok {
			errs.add("body", "must be a string for content type %s", mt)
			return nil
		}
		p.body, p.recordBody = []byte(s), jsonString(s)
	}
	return nil
}

// hasProperty reports whether a JSON schema declares the named property.
func hasProperty(schema json.RawMessage, name string) bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return false
	}
	_, ok := s.Properties[name]
	return ok
}

// readHTTP reads an OpenAPI answer: JSON as is, anything else as a string.
func readHTTP(_ string, body []byte) (json.RawMessage, string) {
	return jsonBody(body), ""
}
