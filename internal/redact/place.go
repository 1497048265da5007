package redact

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Where a call put an argument in the request it sent.
const (
	// InQuery is a query parameter: Name.
	InQuery = "query"
	// InHeader is a header: Name.
	InHeader = "header"
	// InPath is a run of the URL's escaped path: Start to End.
	InPath = "path"
	// InBody is a member of a JSON body (or, for a body sent as text, the
	// whole of it): Name is its JSON pointer in the body.
	InBody = "body"
	// InForm is a field of a form-encoded body: Name.
	InForm = "form"
	// InXML is a run of an XML body's text: Start to End, XML-escaped.
	InXML = "xml"
)

// Place says where a call put an argument, or part of one, in the request
// it sent: the call builders know it, so that a value a field pointer
// masks is masked where it went, whatever its length, rather than
// searched for as text.
type Place struct {
	// Arg is the JSON pointer of the value in the arguments: "/cvv",
	// "/card" (a body member holding the object), "/card/cvv".
	Arg string
	// In is InQuery, InHeader, InPath, InBody, InForm or InXML.
	In string
	// Name is the query parameter, header or form field; for InBody the
	// JSON pointer ("" for the whole body) where the value sits.
	Name string
	// Start and End bound the value's bytes, as sent: in the URL's
	// escaped path (InPath) or the body (InXML).
	Start, End int
}

// Request is the part of a recorded request that places point into.
type Request struct {
	URL    string
	Header map[string][]string
	// Body is JSON, or a JSON string holding a body sent as text.
	Body json.RawMessage
}

// Placed masks, in req, every place holding a value of args that a field
// pointer rooted at /arguments names (or a value within which one lies),
// as kind field; the values are remembered for later. A URL's user
// information is dropped.
func (m *Masker) Placed(req *Request, places []Place, fields []string, args map[string]any) {
	if m == nil {
		return
	}
	var pointers [][]string
	for _, f := range fields {
		if root, tokens, err := parseField(f); err == nil && root == RootArguments {
			pointers = append(pointers, tokens)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var (
		query, header, form []string
		path, text          [][2]int
		body                [][]string
	)
	for _, p := range places {
		for _, f := range pointers {
			arg := pointerTokens(p.Arg)
			rest, ok := covers(f, arg)
			if !ok || p.In != InBody && len(rest) > 0 && !holds(lookup(args, arg), rest) {
				continue
			}
			switch p.In {
			case InQuery:
				query = append(query, p.Name)
			case InHeader:
				header = append(header, p.Name)
			case InForm:
				form = append(form, p.Name)
			case InPath:
				path = append(path, [2]int{p.Start, p.End})
			case InXML:
				text = append(text, [2]int{p.Start, p.End})
			case InBody:
				body = append(body, append(pointerTokens(p.Name), rest...))
			}
		}
	}
	req.URL = m.placedURL(req.URL, query, path)
	for name, vals := range req.Header {
		if slices.ContainsFunc(header, func(n string) bool { return strings.EqualFold(n, name) }) {
			for i, v := range vals {
				vals[i] = m.field(v)
			}
		}
	}
	if len(body) > 0 || len(form) > 0 || len(text) > 0 {
		req.Body = m.placedBody(req.Body, body, form, text)
	}
}

// covers reports whether the field pointer f names the value at the
// argument pointer arg, a value within it, or one holding it; rest is
// what of f goes on below arg.
func covers(f, arg []string) (rest []string, ok bool) {
	for i := range min(len(f), len(arg)) {
		if f[i] != "*" && f[i] != arg[i] {
			return nil, false
		}
	}
	if len(f) > len(arg) {
		return f[len(arg):], true
	}
	return nil, true
}

// lookup returns the value at tokens in args (nil when there is none).
func lookup(args map[string]any, tokens []string) any {
	var v any = args
	for _, t := range tokens {
		switch x := v.(type) {
		case map[string]any:
			v = x[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// holds reports whether v has a value at tokens ("*" is any member or
// element).
func holds(v any, tokens []string) bool {
	if len(tokens) == 0 {
		return v != nil
	}
	t, rest := tokens[0], tokens[1:]
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if (t == "*" || k == t) && holds(e, rest) {
				return true
			}
		}
	case []any:
		for i, e := range x {
			if (t == "*" || fmt.Sprint(i) == t) && holds(e, rest) {
				return true
			}
		}
	}
	return false
}

// pointerTokens splits a JSON pointer into its reference tokens, unescaped.
func pointerTokens(p string) []string {
	if p == "" {
		return nil
	}
	var out []string
	for t := range strings.SplitSeq(strings.TrimPrefix(p, "/"), "/") {
		out = append(out, strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~"))
	}
	return out
}

// field masks one value as kind field and remembers it.
func (m *Masker) field(v string) string {
	if v == "" || tokenRE.FindString(v) == v {
		return v
	}
	tok := m.Token(Field, v)
	m.remember(v, tok)
	m.masked++
	return tok
}

// placedURL masks the values of the named query parameters and the runs
// of the escaped path, and drops user information.
func (m *Masker) placedURL(raw string, query []string, path [][2]int) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User = nil
	if len(path) > 0 {
		ep := u.EscapedPath()
		slices.SortFunc(path, func(a, b [2]int) int { return b[0] - a[0] })
		last := len(ep) + 1
		for _, r := range path {
			if r[0] < 0 || r[1] > len(ep) || r[0] > r[1] || r[1] > last {
				continue // not where the builder said, or overlapping: left to URL
			}
			v, err := url.PathUnescape(ep[r[0]:r[1]])
			if err != nil {
				continue
			}
			ep = ep[:r[0]] + url.PathEscape(m.field(v)) + ep[r[1]:]
			last = r[0]
		}
		if p, err := url.PathUnescape(ep); err == nil {
			u.Path, u.RawPath = p, ep
		}
	}
	if len(query) > 0 {
		q := u.Query()
		for _, name := range query {
			for i, v := range q[name] {
				q[name][i] = m.field(v)
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// placedBody masks the body's members at the pointers, the fields of a
// form body and the runs of an XML body.
func (m *Masker) placedBody(raw json.RawMessage, pointers [][]string, form []string, runs [][2]int) json.RawMessage {
	doc, ok := Decode(raw)
	if !ok {
		return raw
	}
	if s, isText := doc.(string); isText && (len(form) > 0 || len(runs) > 0) {
		switch {
		case len(runs) > 0:
			s = m.xmlRuns(s, runs)
		default:
			s = m.formFields(s, form)
		}
		doc = s
	}
	for _, p := range pointers {
		doc = m.at(doc, p)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return raw
	}
	return json.RawMessage(strings.TrimRight(b.String(), "\n"))
}

// formFields masks the values of the named fields of a form body.
func (m *Masker) formFields(s string, names []string) string {
	f, err := url.ParseQuery(s)
	if err != nil {
		return s
	}
	for _, name := range names {
		for i, v := range f[name] {
			f[name][i] = m.field(v)
		}
	}
	return f.Encode()
}

// xmlRuns masks runs of XML text, each unescaped to the value it holds.
func (m *Masker) xmlRuns(s string, runs [][2]int) string {
	slices.SortFunc(runs, func(a, b [2]int) int { return b[0] - a[0] })
	last := len(s) + 1
	for _, r := range runs {
		if r[0] < 0 || r[1] > len(s) || r[0] > r[1] || r[1] > last {
			continue
		}
		var v string
		if err := xml.Unmarshal([]byte("<v>"+s[r[0]:r[1]]+"</v>"), &v); err != nil {
			continue
		}
		var esc strings.Builder
		_ = xml.EscapeText(&esc, []byte(m.field(v)))
		s = s[:r[0]] + esc.String() + s[r[1]:]
		last = r[0]
	}
	return s
}
