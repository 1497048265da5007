package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// methods are the operations of a path item, in the order operations of one
// path are listed.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// builder turns the paths of an OpenAPI 3.x generic tree into operations.
type builder struct {
	root   map[string]any
	render *renderer
	warn   func(format string, args ...any)
	// abortOnBudget stops with errBudget once the renderer's budget is spent.
	abortOnBudget bool
	// buf is where inputs are assembled.
	buf []byte
}

// errBudget reports that schema rendering went over its budget.
var errBudget = errors.New("schema rendering budget exhausted")

// operations returns one operation per path × method, ordered by path and
// then method, with unique ids. Webhooks and callbacks are not operations.
func (bd *builder) operations(ctx context.Context) ([]tool.Operation, error) {
	raw, ok := bd.root["paths"]
	if !ok || raw == nil {
		return nil, nil
	}
	paths, ok := raw.(map[string]any)
	if !ok {
		return nil, problem.New(problem.SpecInvalid, "paths: must be an object, got %s", typeName(raw))
	}
	var ops []tool.Operation
	var explicit []bool
	for _, path := range sortedKeys(paths) {
		if strings.HasPrefix(path, "x-") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("import openapi: %w", err)
		}
		if bd.abortOnBudget && bd.render.exhausted {
			return nil, errBudget
		}
		item := resolve(bd.root, paths[path])
		if item == nil {
			bd.warn("paths.%s: not an object or an unresolvable $ref; skipped", path)
			continue
		}
		for _, method := range methods {
			raw, ok := item[method]
			if !ok {
				continue
			}
			op, ok := raw.(map[string]any)
			if !ok {
				bd.warn("paths.%s.%s: not an object; skipped", path, method)
				continue
			}
			o, hasID := bd.operation(path, method, item, op)
			ops = append(ops, o)
			explicit = append(explicit, hasID)
		}
	}
	bd.assignIDs(ops, explicit)
	return ops, nil
}

// assignIDs makes ids unique: operationIds are placed first, then the
// synthesized ones; a later duplicate gets the first free suffix _2, _3, ….
// The order of ops is fixed by the document, so the suffixes are stable.
func (bd *builder) assignIDs(ops []tool.Operation, explicit []bool) {
	taken := make(map[string]bool, len(ops))
	for _, pass := range []bool{true, false} {
		for i := range ops {
			if explicit[i] != pass {
				continue
			}
			id := ops[i].ID
			if taken[id] {
				n := 2
				for taken[id+"_"+strconv.Itoa(n)] {
					n++
				}
				unique := id + "_" + strconv.Itoa(n)
				bd.warn("%s %s: operation id %q is already used; renamed %q", ops[i].HTTP.Method, ops[i].HTTP.Path, id, unique)
				id = unique
			}
			taken[id] = true
			ops[i].ID = id
		}
	}
}

// synthesizedID is the id of an operation without operationId: the method
// in lower case followed by the path with every character other than an
// ASCII letter or digit replaced by "_" (each rune, so "/customers/{id}"
// gives "get_customers__id_"; the path's leading "/" becomes the separator).
func synthesizedID(method, path string) string {
	var sb strings.Builder
	sb.Grow(len(method) + len(path))
	sb.WriteString(method)
	for _, c := range path {
		if c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			sb.WriteRune(c)
		} else {
			sb.WriteByte('_')
		}
	}
	return sb.String()
}

// operation builds one operation and reports whether it had an operationId.
func (bd *builder) operation(path, method string, item, op map[string]any) (tool.Operation, bool) {
	id, hasID := op["operationId"].(string)
	hasID = hasID && id != ""
	if !hasID {
		id = synthesizedID(method, path)
	}
	kind := tool.Write
	switch method {
	case "get", "head", "options", "trace":
		kind = tool.Read
	}
	where := "paths." + path + "." + method
	params := bd.params(where, item["parameters"], op["parameters"])
	body, bodyNode, bodyDesc := bd.body(where, op["requestBody"])
	binding := &tool.HTTPBinding{
		Method:   strings.ToUpper(method),
		Path:     path,
		Body:     body,
		Security: bd.security(op),
	}
	for _, p := range params {
		binding.Params = append(binding.Params, p.Param)
	}
	return tool.Operation{
		ID:          id,
		Kind:        kind,
		Summary:     firstString(op["summary"], item["summary"]),
		Description: firstString(op["description"], item["description"]),
		Input:       bd.input(where, params, body, bodyNode, bodyDesc),
		Output:      bd.output(op["responses"]),
		HTTP:        binding,
	}, hasID
}

func firstString(vs ...any) string {
	for _, v := range vs {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// param is a parameter with the schema its Input property shows (the
// parameter's schema with its description).
type param struct {
	tool.Param
	property json.RawMessage
}

// params merges path-level and operation-level parameters (the operation's
// win, by name and location) and drops cookie parameters.
func (bd *builder) params(where string, pathLevel, opLevel any) []param {
	var out []param
	index := make(map[string]int)
	for _, list := range []any{pathLevel, opLevel} {
		items, ok := list.([]any)
		if !ok {
			if list != nil {
				bd.warn("%s.parameters: not an array; ignored", where)
			}
			continue
		}
		for i, raw := range items {
			p := resolve(bd.root, raw)
			name, _ := p["name"].(string)
			in, _ := p["in"].(string)
			if p == nil || name == "" {
				bd.warn("%s.parameters[%d]: no name or an unresolvable $ref; ignored", where, i)
				continue
			}
			switch in {
			case "path", "query", "header":
			case "cookie":
				continue
			default:
				bd.warn("%s.parameters[%d]: %q has unsupported location %q; ignored", where, i, name, in)
				continue
			}
			required, _ := p["required"].(bool)
			schema := paramSchema(p)
			prop := schema
			if desc, ok := p["description"].(string); ok && desc != "" {
				prop = withDescription(schema, desc)
			}
			rendered := bd.render.render(prop)
			if rendered == nil {
				rendered = json.RawMessage("{}")
			}
			np := param{
				Param:    tool.Param{Name: name, In: in, Required: required || in == "path", Schema: rendered},
				property: rendered,
			}
			key := in + "\x00" + name
			if j, ok := index[key]; ok {
				out[j] = np
				continue
			}
			index[key] = len(out)
			out = append(out, np)
		}
	}
	return out
}

// paramSchema is a parameter's schema, or that of its first content entry,
// or, for a Swagger 2.0 parameter, the schema its type and bounds make.
func paramSchema(p map[string]any) any {
	if s, ok := p["schema"]; ok {
		return s
	}
	if content, ok := p["content"].(map[string]any); ok {
		if mt, _ := pickMediaType(content, false); mt != nil {
			return mt["schema"]
		}
		return nil
	}
	if _, ok := p["type"]; ok {
		return valueSchema(p)
	}
	return nil
}

// withDescription returns a copy of a schema node carrying desc, unless it
// has a description of its own.
func withDescription(schema any, desc string) any {
	switch s := schema.(type) {
	case nil:
		return map[string]any{"description": desc}
	case map[string]any:
		if _, ok := s["description"]; ok {
			return s
		}
		c := make(map[string]any, len(s)+1)
		for k, v := range s {
			c[k] = v
		}
		c["description"] = desc
		return c
	}
	return schema
}

// body returns an operation's request body binding, its schema node and
// its description; nil when it takes none.
func (bd *builder) body(where string, raw any) (*tool.Body, any, string) {
	if raw == nil {
		return nil, nil, ""
	}
	rb := resolve(bd.root, raw)
	if rb == nil {
		bd.warn("%s.requestBody: not an object or an unresolvable $ref; ignored", where)
		return nil, nil, ""
	}
	content, _ := rb["content"].(map[string]any)
	mt, ct := pickMediaType(content, false)
	if mt == nil {
		bd.warn("%s.requestBody: no content; ignored", where)
		return nil, nil, ""
	}
	required, _ := rb["required"].(bool)
	node := mt["schema"]
	desc, _ := rb["description"].(string)
	return &tool.Body{Required: required, ContentType: ct, Schema: bd.render.render(node)}, node, desc
}

// pickMediaType chooses a content entry: application/json, else another
// JSON type (application/*+json), else, unless jsonOnly, the first by name.
func pickMediaType(content map[string]any, jsonOnly bool) (map[string]any, string) {
	if len(content) == 0 {
		return nil, ""
	}
	keys := sortedKeys(content)
	rank := func(ct string) int {
		base, _, _ := strings.Cut(strings.ToLower(ct), ";")
		base = strings.TrimSpace(base)
		switch {
		case base == "application/json":
			return 0
		case strings.HasSuffix(base, "+json") || strings.HasSuffix(base, "/json"):
			return 1
		case base == "*/*" || base == "application/*":
			return 2
		}
		return 3
	}
	best := -1
	for i, k := range keys {
		if best < 0 || rank(k) < rank(keys[best]) {
			best = i
		}
	}
	ct := keys[best]
	if jsonOnly && rank(ct) > 2 {
		return nil, ""
	}
	mt, ok := content[ct].(map[string]any)
	if !ok {
		return map[string]any{}, ct
	}
	return mt, ct
}

// security lists the scheme names an operation requires: its own security
// requirements, else the document's.
func (bd *builder) security(op map[string]any) []string {
	reqs, ok := op["security"]
	if !ok {
		reqs = bd.root["security"]
	}
	list, _ := reqs.([]any)
	var names []string
	for _, req := range list {
		m, ok := req.(map[string]any)
		if !ok {
			continue
		}
		for _, name := range sortedKeys(m) {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// successCodes are the responses whose schema is an operation's output, in
// order of preference.
var successCodes = func() []string {
	codes := []string{"200", "201"}
	for c := 202; c <= 299; c++ {
		codes = append(codes, strconv.Itoa(c))
	}
	return append(codes, "2XX", "2xx", "default")
}()

// output is the JSON schema of the first success response's JSON content.
func (bd *builder) output(raw any) json.RawMessage {
	responses, ok := raw.(map[string]any)
	if !ok {
		return nil
	}
	for _, code := range successCodes {
		r, ok := responses[code]
		if !ok {
			continue
		}
		resp := resolve(bd.root, r)
		content, _ := resp["content"].(map[string]any)
		mt, _ := pickMediaType(content, true)
		if mt == nil {
			return nil
		}
		return bd.render.render(mt["schema"])
	}
	return nil
}
