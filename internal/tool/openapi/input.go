package openapi

import (
	"encoding/json"
	"slices"

	"github.com/agentplane/agentplane/internal/tool"
)

// Descriptions of the whole-body argument.
const (
	bodyObjectNote = "The whole request body. Its properties may instead be given as top-level arguments."
	bodyNote       = "The whole request body."
)

// input is the JSON Schema (2020-12) of an operation's call arguments, an
// object whose properties are, in order:
//
//   - each path, query and header parameter, by name (a second parameter of
//     the same name in another location is dropped with a warning);
//   - "body", the whole request body, unless a parameter is named so;
//   - when the body schema is an object, each of its properties (those of
//     allOf members included) not already taken by a parameter.
//
// required lists the required parameters, and "body" when the body is
// required and not an object. Without a body, additionalProperties is false.
func (bd *builder) input(where string, params []param, body *tool.Body, bodyNode any, bodyDesc string) json.RawMessage {
	b := append(bd.buf[:0], `{"type":"object","properties":{`...)
	taken := make(map[string]bool, len(params)+1)
	var required []string
	add := func(name string, schema []byte) {
		if len(taken) > 0 {
			b = append(b, ',')
		}
		taken[name] = true
		b = appendString(b, name)
		b = append(b, ':')
		if len(schema) == 0 {
			// A property without a schema (YAML's "name:" alone) takes
			// any value, as it does inside the body's schema.
			schema = []byte(`{}`)
		}
		b = append(b, schema...)
	}
	for _, p := range params {
		if taken[p.Name] {
			bd.warn("%s: parameter %q (in %s) has the name of another parameter and cannot be given as an argument", where, p.Name, p.In)
			continue
		}
		add(p.Name, p.property)
		if p.Required {
			required = append(required, p.Name)
		}
	}
	if body != nil {
		names, props, isObject := bd.objectProperties(bodyNode)
		if taken["body"] {
			bd.warn("%s: a parameter named \"body\" hides the whole-body argument", where)
		} else {
			note := bodyNote
			if isObject {
				note = bodyObjectNote
			}
			if bodyDesc != "" {
				note = bodyDesc + " " + note
			}
			schema := bd.render.render(withDescription(bodyNode, note))
			add("body", schema)
			if body.Required && !isObject {
				required = append(required, "body")
			}
		}
		for _, name := range names {
			if !taken[name] {
				add(name, bd.render.render(props[name]))
			}
		}
	}
	b = append(b, '}')
	if len(required) > 0 {
		b = append(b, `,"required":[`...)
		for i, name := range required {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, name)
		}
		b = append(b, ']')
	}
	if body == nil {
		b = append(b, `,"additionalProperties":false`...)
	}
	b = append(b, '}')
	bd.buf = b[:0]
	return bd.render.keep(b)
}

// objectProperties reports whether a body schema is an object and lists its
// properties, with those of its allOf members, by name.
func (bd *builder) objectProperties(node any) (names []string, props map[string]any, isObject bool) {
	m := resolve(bd.root, node)
	if m == nil {
		return nil, nil, false
	}
	props = make(map[string]any)
	collect := func(s map[string]any) bool {
		p, hasProps := s["properties"].(map[string]any)
		for k, v := range p {
			if _, dup := props[k]; !dup {
				props[k] = v
			}
		}
		switch t := s["type"].(type) {
		case string:
			return t == "object"
		case []any:
			return slices.Contains(t, any("object"))
		case nil:
			return hasProps
		}
		return false
	}
	isObject = collect(m)
	if all, ok := m["allOf"].([]any); ok {
		for _, member := range all {
			if s := resolve(bd.root, member); s != nil && collect(s) {
				isObject = true
			}
		}
	}
	if !isObject {
		return nil, nil, false
	}
	return sortedKeys(props), props, true
}
