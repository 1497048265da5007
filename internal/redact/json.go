package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Roots of a field pointer: the document of a call it addresses.
const (
	RootArguments = "/arguments"
	RootRequest   = "/request/body"
	RootResponse  = "/response/body"
)

var roots = []string{RootArguments, RootRequest, RootResponse}

// parseField splits a field pointer into its root and its reference
// tokens (unescaped), or says what is wrong with it.
func parseField(p string) (root string, tokens []string, err error) {
	if p != "" && !strings.HasPrefix(p, "/") {
		return "", nil, fmt.Errorf("%q is not a JSON pointer (RFC 6901): it must be empty or start with \"/\"", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return "", nil, fmt.Errorf("%q is not a JSON pointer (RFC 6901): \"~\" must be followed by 0 or 1 (\"~0\" is ~, \"~1\" is /)", p)
		}
	}
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			rest := strings.TrimPrefix(p, r)
			if rest == "" {
				return r, nil, nil
			}
			for _, t := range strings.Split(rest[1:], "/") {
				tokens = append(tokens, strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~"))
			}
			return r, tokens, nil
		}
	}
	return "", nil, fmt.Errorf("%q must start with %s, %s or %s: the document of the call it points into", p, RootArguments, RootRequest, RootResponse)
}

// Fields masks, in doc (a decoded JSON value), the values the pointers
// rooted at root name, as kind field; it returns the new document.
func (m *Masker) Fields(doc any, root string, fields []string) any {
	if m == nil {
		return doc
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fields(doc, root, fields)
}

func (m *Masker) fields(doc any, root string, fields []string) any {
	for _, f := range fields {
		r, tokens, err := parseField(f)
		if err != nil || r != root {
			continue
		}
		doc = m.at(doc, tokens)
	}
	return doc
}

// at masks the value tokens name in v ("*" is every member or element).
func (m *Masker) at(v any, tokens []string) any {
	if len(tokens) == 0 {
		if s, ok := v.(string); ok && tokenRE.MatchString(s) && tokenRE.FindString(s) == s {
			return s
		}
		var text string
		switch x := v.(type) {
		case nil:
			return nil
		case string:
			text = x
		default:
			b, _ := json.Marshal(x)
			text = string(b)
		}
		tok := m.Token(Field, text)
		m.remember(text, tok)
		m.masked++
		return tok
	}
	t, rest := tokens[0], tokens[1:]
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if t == "*" || k == t {
				x[k] = m.at(e, rest)
			}
		}
	case []any:
		for i, e := range x {
			if t == "*" || fmt.Sprint(i) == t {
				x[i] = m.at(e, rest)
			}
		}
	}
	return v
}

// Strings masks every string of v (object keys too) with Text.
func (m *Masker) Strings(v any, detect []string) any {
	if m == nil {
		return v
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.strings(v, detect)
}

func (m *Masker) strings(v any, detect []string) any {
	switch x := v.(type) {
	case string:
		return m.text(x, detect)
	case map[string]any:
		for k, e := range x {
			nk := m.text(k, detect)
			if nk != k {
				delete(x, k)
			}
			x[nk] = m.strings(e, detect)
		}
	case []any:
		for i, e := range x {
			x[i] = m.strings(e, detect)
		}
	}
	return v
}

// Decode reads raw as a JSON value, numbers kept exactly; ok is false
// when raw is not JSON.
func Decode(raw []byte) (v any, ok bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// JSON masks a JSON document: the fields rooted at root, then every
// string with Text. What is not JSON is masked as text, kept a JSON
// string when it was one.
func (m *Masker) JSON(raw json.RawMessage, root string, fields, detect []string) json.RawMessage {
	if m == nil || len(raw) == 0 {
		return raw
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(detect) == 0 && len(m.known) == 0 && !rooted(fields, root) {
		return raw // nothing could be masked: the common case costs no decoding
	}
	before := m.masked
	v, ok := Decode(raw)
	if !ok {
		s := m.text(string(raw), detect)
		if m.masked == before {
			return raw
		}
		return json.RawMessage(s)
	}
	v = m.strings(m.fields(v, root, fields), detect)
	if m.masked == before {
		return raw
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return raw
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// rooted reports whether a field pointer is rooted at root.
func rooted(fields []string, root string) bool {
	for _, f := range fields {
		if r, _, err := parseField(f); err == nil && r == root {
			return true
		}
	}
	return false
}
