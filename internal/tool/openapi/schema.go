package openapi

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Schema rendering. Operation schemas are written straight from the generic
// tree as JSON bytes, with local $refs replaced by the schema they name:
//
//   - at most maxDepth references are expanded along any path; deeper ones,
//     and references back to a schema being expanded (cycles), become a stub
//     {"type": …, "description": "<name>: … not expanded"};
//   - an expansion is memoized per (ref, remaining depth), whatever the
//     references above it, so a component used by a thousand operations is
//     rendered once per depth and rendering is linear in the number of
//     components even in densely cyclic documents (Stripe's, say). The price:
//     a cycle is cut where it was met first, so an expansion reused in
//     another context may stop one level earlier or later than it would
//     there; it is deterministic all the same, as the order of rendering is;
//   - a rendering is abandoned as soon as it grows past maxBytes and redone
//     one level shallower, so a wide, deep component graph cannot blow up
//     one schema, nor the work of rendering it;
//   - all rendering together, copies of memoized expansions included, is
//     bounded by a byte budget, charged as rendering goes; past it, further
//     references and schemas become stubs (Importer.operations then starts
//     over with a smaller depth);
//   - remote and unresolvable references become stubs with a warning and are
//     never fetched.
//
// OpenAPI 3.0 schema dialect is converted to JSON Schema 2020-12 on the way:
// `nullable: true` becomes a "null" member of `type`, and boolean
// `exclusiveMinimum`/`exclusiveMaximum` become their numeric forms.

// Keywords whose values are subschemas, in the shape they take.
var (
	schemaKeywords = map[string]bool{
		"additionalProperties": true, "additionalItems": true, "not": true, "if": true, "then": true,
		"else": true, "contains": true, "propertyNames": true, "unevaluatedItems": true,
		"unevaluatedProperties": true, "contentSchema": true, "items": true,
	}
	schemaMapKeywords  = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true}
	schemaListKeywords = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true}
)

type memoKey struct {
	ref   string
	depth int
}

// renderer renders the schemas of one document.
type renderer struct {
	root     map[string]any
	v30      bool
	maxDepth int
	maxBytes int
	// budget is what may still be rendered, in bytes; mark is how much of
	// the rendering being written has been charged to it.
	budget int
	mark   int
	warn   func(format string, args ...any)

	// scratch is where schemas are rendered, to be copied at their exact
	// size; with discard set, they are only charged to the budget and render
	// returns nil.
	scratch []byte
	discard bool
	// kept holds the schemas returned, by hash.
	seed maphash.Seed
	kept map[uint64][]json.RawMessage

	memo       map[memoKey][]byte
	stack      []string
	unresolved map[string]bool
	exhausted  bool
}

func newRenderer(root map[string]any, v30 bool, maxDepth, maxBytes, budget int, warn func(string, ...any)) *renderer {
	return &renderer{
		root: root, v30: v30, maxDepth: maxDepth, maxBytes: maxBytes, budget: budget, warn: warn,
		memo: make(map[memoKey][]byte), unresolved: make(map[string]bool),
	}
}

// render returns the JSON of a schema node with references inlined, nil for
// a nil node (and for every node when the renderer discards).
func (r *renderer) render(node any) json.RawMessage {
	if node == nil {
		return nil
	}
	for depth := r.maxDepth; ; depth-- {
		if r.budget <= 0 {
			r.exhausted = true
			name := "schema"
			if m, ok := node.(map[string]any); ok {
				if ref, ok := m["$ref"].(string); ok {
					name = refName(ref)
				}
			}
			return r.stub(name, node, "not expanded (size limit)")
		}
		r.mark = 0
		b := r.schema(r.scratch[:0], node, depth)
		r.charge(b)
		r.scratch = b[:0]
		if len(b) <= r.maxBytes || depth == 0 {
			return r.keep(b)
		}
	}
}

// keep returns the copy of a finished schema the operations share: equal
// schemas (a thousand operations answering the same type) are kept once.
// When the renderer discards, it returns nil.
func (r *renderer) keep(b []byte) json.RawMessage {
	if r.discard || len(b) == 0 {
		return nil
	}
	if r.kept == nil {
		r.seed, r.kept = maphash.MakeSeed(), make(map[uint64][]json.RawMessage)
	}
	h := maphash.Bytes(r.seed, b)
	for _, c := range r.kept[h] {
		if bytes.Equal(c, b) {
			return c
		}
	}
	// Clipped: an append to one operation's schema must not write into
	// another's.
	c := json.RawMessage(slices.Clip(bytes.Clone(b)))
	r.kept[h] = append(r.kept[h], c)
	return c
}

// charge spends what was written to b, the rendering in progress, since
// the last charge.
func (r *renderer) charge(b []byte) {
	r.budget -= len(b) - r.mark
	r.mark = len(b)
}

// full reports whether a rendering at depth has grown past maxBytes, when
// it is abandoned, unfinished, to be redone shallower. A rendering at depth
// 0 expands no reference, is as large as the schema it renders, and is
// always finished.
func (r *renderer) full(b []byte, depth int) bool {
	return depth > 0 && len(b) > r.maxBytes
}

// schema appends the rendering of a schema node.
func (r *renderer) schema(b []byte, node any, depth int) []byte {
	switch n := node.(type) {
	case bool:
		return strconv.AppendBool(b, n)
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			return r.ref(b, n, ref, depth)
		}
		b = append(b, '{')
		return r.members(b, n, depth, "", true)
	}
	// Not a schema: accept anything rather than invent a constraint.
	return append(b, "{}"...)
}

// ref appends the expansion of a node holding $ref; its other members
// (descriptions mostly) are kept beside the target in an allOf.
func (r *renderer) ref(b []byte, n map[string]any, ref string, depth int) []byte {
	target := r.expand(ref, depth)
	if len(n) == 1 {
		b = append(b, target...)
		r.charge(b)
		return b
	}
	b = append(b, `{"allOf":[`...)
	b = append(b, target...)
	b = append(b, ']')
	r.charge(b)
	if r.full(b, depth) {
		return b
	}
	return r.members(b, n, depth, "$ref", false)
}

// members appends n's members other than skip, sorted by name, and the
// closing brace; first says whether b ends with the opening brace.
func (r *renderer) members(b []byte, n map[string]any, depth int, skip string, first bool) []byte {
	keys := sortedKeys(n)
	nullable := r.v30 && n["nullable"] == true
	for _, k := range keys {
		if r.full(b, depth) {
			return b
		}
		v := n[k]
		switch {
		case k == skip:
			continue
		case k == "nullable" && r.v30:
			if _, ok := n["type"].(string); ok {
				continue
			}
		case k == "type" && nullable:
			if t, ok := v.(string); ok {
				v = []any{t, "null"}
			}
		case k == "enum" && nullable:
			if list, ok := v.([]any); ok && !slices.Contains(list, nil) {
				v = append(slices.Clip(list), nil)
			}
		case k == "minimum" || k == "maximum":
			if n["exclusiveM"+k[1:]] == true {
				continue // written as the numeric exclusive form
			}
		case k == "exclusiveMinimum" || k == "exclusiveMaximum":
			if flag, ok := v.(bool); ok {
				bound, has := n[strings.ToLower(k[9:10])+k[10:]]
				if !flag || !has {
					continue
				}
				v = bound
			}
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, k)
		b = append(b, ':')
		b = r.member(b, k, v, depth)
	}
	return append(b, '}')
}

// member appends the value of schema keyword k.
func (r *renderer) member(b []byte, k string, v any, depth int) []byte {
	switch {
	case schemaKeywords[k]:
		if list, ok := v.([]any); ok && k == "items" {
			return r.schemaList(b, list, depth)
		}
		return r.schema(b, v, depth)
	case schemaMapKeywords[k]:
		m, ok := v.(map[string]any)
		if !ok {
			return appendValue(b, v)
		}
		b = append(b, '{')
		for i, name := range sortedKeys(m) {
			if r.full(b, depth) {
				return b
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, name)
			b = append(b, ':')
			b = r.schema(b, m[name], depth)
		}
		return append(b, '}')
	case schemaListKeywords[k]:
		if list, ok := v.([]any); ok {
			return r.schemaList(b, list, depth)
		}
	}
	return appendValue(b, v)
}

func (r *renderer) schemaList(b []byte, list []any, depth int) []byte {
	b = append(b, '[')
	for i, e := range list {
		if r.full(b, depth) {
			return b
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = r.schema(b, e, depth)
	}
	return append(b, ']')
}

// expand returns the rendering of the schema a reference names.
func (r *renderer) expand(ref string, depth int) []byte {
	if !strings.HasPrefix(ref, "#") {
		return r.stub(refName(ref), nil, "remote reference, not followed")
	}
	target, ok := r.lookup(ref)
	if !ok {
		if !r.unresolved[ref] {
			r.unresolved[ref] = true
			r.warn("unresolved reference %q", ref)
		}
		return r.stub(refName(ref), nil, "unresolved reference")
	}
	if slices.Contains(r.stack, ref) {
		return r.stub(refName(ref), target, "recursive reference, not expanded")
	}
	if depth <= 0 {
		return r.stub(refName(ref), target, "not expanded (depth limit)")
	}
	if r.budget <= 0 {
		r.exhausted = true
		return r.stub(refName(ref), target, "not expanded (size limit)")
	}
	key := memoKey{ref, depth}
	if b, ok := r.memo[key]; ok {
		return b
	}
	saved := r.mark
	r.mark = 0
	r.stack = append(r.stack, ref)
	b := r.schema(nil, target, depth-1)
	r.stack = r.stack[:len(r.stack)-1]
	r.charge(b)
	r.mark = saved
	if len(b) > r.maxBytes && depth > 1 {
		b = r.expand(ref, depth-1)
	}
	r.memo[key] = b
	return b
}

// stub stands for a schema that is not expanded, keeping its type; name
// says which in its description.
func (r *renderer) stub(name string, target any, why string) []byte {
	b := []byte{'{'}
	if m, ok := target.(map[string]any); ok {
		if t, ok := m["type"]; ok {
			if s, ok := t.(string); ok && r.v30 && m["nullable"] == true {
				t = []any{s, "null"}
			}
			b = append(b, `"type":`...)
			b = appendValue(b, t)
			b = append(b, ',')
		}
	}
	b = append(b, `"description":`...)
	b = appendString(b, name+": "+why)
	return append(b, '}')
}

// refName is the last segment of a reference, for messages.
func refName(ref string) string {
	if i := strings.LastIndexByte(ref, '/'); i >= 0 && i+1 < len(ref) {
		return unescapePointer(ref[i+1:])
	}
	return ref
}

// lookup resolves a local reference ("#/components/schemas/Pet").
func (r *renderer) lookup(ref string) (any, bool) {
	return resolvePointer(r.root, ref)
}

// resolvePointer follows a local reference's JSON pointer from the root.
func resolvePointer(root map[string]any, ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	if frag == "" {
		return root, true
	}
	if frag[0] != '/' {
		return nil, false // a named anchor: not supported
	}
	var cur any = root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = unescapePointer(tok)
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func unescapePointer(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// resolve follows a chain of local $refs (parameters, request bodies,
// responses, path items) to the object it ends at, nil when it ends nowhere.
func resolve(root map[string]any, node any) map[string]any {
	for range 16 {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		if node, ok = resolvePointer(root, ref); !ok {
			return nil
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
