package call

import (
	"encoding/json"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/redact"
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
	pathValues := map[string]string{}
	query := base.Query()
	header := http.Header{}
	var places []redact.Place
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
			pathValues[p.Name] = url.PathEscape(strings.Join(scalars(v), ","))
		case "query":
			for _, s := range scalars(v) {
				query.Add(p.Name, s)
			}
			places = append(places, redact.Place{Arg: arg(p.Name), In: redact.InQuery, Name: p.Name})
		case "header":
			header.Set(p.Name, strings.Join(scalars(v), ","))
			places = append(places, redact.Place{Arg: arg(p.Name), In: redact.InHeader, Name: p.Name})
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
	p := &prepared{method: strings.ToUpper(b.Method), header: header, read: readHTTP, places: places}
	switch {
	case b.Body == nil:
		errs.unknown(args, used, op.ID)
	case len(rest) == 0:
		if b.Body.Required {
			errs.missing("body", "request body")
		}
	default:
		var body any
		// within is the pointer, in the arguments, of the body's members.
		within := ""
		if len(rest) == 1 && rest[0] == "body" && !hasProperty(b.Body.Schema, "body") {
			body, within = args["body"], "/body"
		} else {
			m := make(map[string]any, len(rest))
			for _, k := range rest {
				m[k] = args[k]
			}
			body = m
		}
		key := schemaKey{tool: t.ID, revision: t.Revision, operation: op.ID, which: "body"}
		if err := e.encodeBody(p, key, b.Body, body, within, &errs); err != nil {
			return nil, err
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}

	prefix := strings.TrimSuffix(base.EscapedPath(), "/") + "/"
	path, spans := expandPath(strings.TrimPrefix(pathOnly(b.Path), "/"), pathValues)
	pu, err := url.Parse(prefix + path)
	if err != nil {
		return nil, problem.Field("path", "the operation's path %q cannot be built into a URL", b.Path)
	}
	u := *base
	u.Path, u.RawPath = pu.Path, pu.RawPath
	u.RawQuery = query.Encode()
	p.url = &u
	p.places = append(p.places, pathPlaces(u.EscapedPath(), len(prefix), spans)...)
	if header.Get("Accept") == "" {
		header.Set("Accept", "application/json")
	}
	return p, nil
}

// pathSpan is where a path parameter's escaped value went in a path.
type pathSpan struct {
	name, value string
	start       int
}

// expandPath fills a path template's {name}s with their escaped values
// (a name without one stays as written), saying where each value went.
func expandPath(tmpl string, values map[string]string) (string, []pathSpan) {
	var b strings.Builder
	var spans []pathSpan
	for {
		open := strings.IndexByte(tmpl, '{')
		end := strings.IndexByte(tmpl[open+1:], '}')
		if open < 0 || end < 0 {
			b.WriteString(tmpl)
			return b.String(), spans
		}
		end += open + 1
		b.WriteString(tmpl[:open])
		name := tmpl[open+1 : end]
		if v, ok := values[name]; ok {
			spans = append(spans, pathSpan{name: name, value: v, start: b.Len()})
			b.WriteString(v)
		} else {
			b.WriteString(tmpl[open : end+1])
		}
		tmpl = tmpl[end+1:]
	}
}

// pathPlaces are the places of the path parameters in the URL's escaped
// path ep, the spans offset by the base path's length. Should the URL
// have written the path otherwise, the whole path is the place.
func pathPlaces(ep string, offset int, spans []pathSpan) []redact.Place {
	places := make([]redact.Place, 0, len(spans))
	for _, s := range spans {
		start, end := offset+s.start, offset+s.start+len(s.value)
		if end > len(ep) || ep[start:end] != s.value {
			start, end = 0, len(ep)
		}
		places = append(places, redact.Place{Arg: arg(s.name), In: redact.InPath, Start: start, End: end})
	}
	return places
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
// The places of the arguments in the body are recorded in p, within
// being the pointer of the body in the arguments ("" when its members are
// arguments).
func (e *Executor) encodeBody(p *prepared, key schemaKey, b *tool.Body, body any, within string, errs *argErrors) error {
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
		if within != "" {
			p.places = append(p.places, redact.Place{Arg: within, In: redact.InBody})
		} else {
			for _, k := range slices.Sorted(maps.Keys(body.(map[string]any))) {
				p.places = append(p.places, redact.Place{Arg: arg(k), In: redact.InBody, Name: arg(k)})
			}
		}
	case mt == "application/x-www-form-urlencoded":
		m, ok := body.(map[string]any)
		if !ok {
			errs.add("body", "must be an object for %s", mt)
			return nil
		}
		form := url.Values{}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			for _, s := range scalars(m[k]) {
				form.Add(k, s)
			}
			p.places = append(p.places, redact.Place{Arg: within + arg(k), In: redact.InForm, Name: k})
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
		p.places = append(p.places, redact.Place{Arg: within, In: redact.InBody})
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
