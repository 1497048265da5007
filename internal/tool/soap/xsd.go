package soap

import (
	"encoding/xml"
	"strconv"

	"github.com/agentplane/agentplane/internal/tool"
)

// Bounds of the JSON Schemas made from XML Schema: maxSchemaNodes is the
// schema nodes converted for one message, maxDocumentNodes for all of a
// document's operations.
const (
	maxSchemaDepth   = 6
	maxSchemaNodes   = 5000
	maxDocumentNodes = 2_000_000
)

// decl is a schema component with the schema it was declared in.
type decl struct {
	n   *node
	ctx *schemaCtx
}

// schemaCtx is what a component's meaning depends on in its schema.
type schemaCtx struct {
	tns string
	// qualified is elementFormDefault="qualified": local elements are in tns.
	qualified bool
}

// schemaSet indexes the top-level components of every schema read.
type schemaSet struct {
	elements map[xml.Name]decl
	types    map[xml.Name]decl
	groups   map[xml.Name]decl
}

func newSchemaSet() *schemaSet {
	return &schemaSet{elements: map[xml.Name]decl{}, types: map[xml.Name]decl{}, groups: map[xml.Name]decl{}}
}

func (s *schemaSet) add(schema *node) {
	ctx := &schemaCtx{tns: schema.attr("targetNamespace"), qualified: schema.attr("elementFormDefault") == "qualified"}
	for _, c := range schema.children {
		if c.name.Space != nsXSD {
			continue
		}
		key := xml.Name{Space: ctx.tns, Local: c.attr("name")}
		var m map[xml.Name]decl
		switch c.name.Local {
		case "element":
			m = s.elements
		case "complexType", "simpleType":
			m = s.types
		case "group":
			m = s.groups
		default:
			continue
		}
		if _, dup := m[key]; !dup {
			m[key] = decl{c, ctx}
		}
	}
}

// isXSD reports whether a namespace is XML Schema's (any edition) or SOAP
// encoding's, whose built-in types share their local names.
func isXSD(ns string) bool {
	switch ns {
	case nsXSD, "http://www.w3.org/2000/10/XMLSchema", "http://www.w3.org/1999/XMLSchema",
		"http://schemas.xmlsoap.org/soap/encoding/", "http://www.w3.org/2003/05/soap-encoding":
		return true
	}
	return false
}

// builtin is the JSON Schema of a built-in XSD type, nil for unknown names.
func builtin(local string) map[string]any {
	switch local {
	case "string", "normalizedString", "token", "anyURI", "QName", "NOTATION", "NCName", "Name", "ID", "IDREF",
		"IDREFS", "ENTITY", "ENTITIES", "NMTOKEN", "NMTOKENS", "language", "gYear", "gYearMonth", "gMonth",
		"gMonthDay", "gDay", "hexBinary":
		return map[string]any{"type": "string"}
	case "base64Binary":
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	case "int", "long", "short", "byte", "integer", "unsignedInt", "unsignedLong", "unsignedShort", "unsignedByte",
		"nonNegativeInteger", "positiveInteger", "negativeInteger", "nonPositiveInteger":
		return map[string]any{"type": "integer"}
	case "decimal", "double", "float":
		return map[string]any{"type": "number"}
	case "boolean":
		return map[string]any{"type": "boolean"}
	case "dateTime":
		return map[string]any{"type": "string", "format": "date-time"}
	case "date":
		return map[string]any{"type": "string", "format": "date"}
	case "time":
		return map[string]any{"type": "string", "format": "time"}
	case "duration":
		return map[string]any{"type": "string", "format": "duration"}
	case "anyType", "anySimpleType":
		return map[string]any{}
	}
	return nil
}

// converter turns XML Schema components into JSON Schemas and parts.
type converter struct {
	set     *schemaSet
	warn    func(format string, args ...any)
	missing map[xml.Name]bool
	// budget counts down the message's nodes, nodes the document's.
	budget int
	nodes  *int
}

func (c *converter) spend() bool {
	c.budget--
	*c.nodes--
	return c.budget >= 0 && *c.nodes >= 0
}

// child is an element a complex type contains.
type child struct {
	n        *node
	ctx      *schemaCtx
	required bool
}

// element resolves an element reference: a global element for ref=, else
// the local declaration. It returns the declaration and its namespace.
func (c *converter) element(el *node, ctx *schemaCtx) (*node, *schemaCtx, string) {
	if q, ok := el.qname("ref"); ok {
		if d, found := c.set.elements[q]; found {
			return d.n, d.ctx, q.Space
		}
		c.notFound(q, "element")
		return nil, nil, q.Space
	}
	ns := ""
	if form := el.attr("form"); form == "qualified" || (form == "" && ctx.qualified) {
		ns = ctx.tns
	}
	return el, ctx, ns
}

func (c *converter) notFound(q xml.Name, what string) {
	if !c.missing[q] {
		c.missing[q] = true
		c.warn("%s {%s}%s not found in the schemas read", what, q.Space, q.Local)
	}
}

// elementSchema is the JSON Schema of a declared element, an array when it
// may occur more than once.
func (c *converter) elementSchema(el *node, ctx *schemaCtx, depth int) map[string]any {
	s := c.elementType(el, ctx, depth)
	if repeats(el) {
		return map[string]any{"type": "array", "items": s}
	}
	return s
}

// elementType is the JSON Schema of one occurrence of an element.
func (c *converter) elementType(el *node, ctx *schemaCtx, depth int) map[string]any {
	el, ctx, _ = c.element(el, ctx)
	if el == nil || depth > maxSchemaDepth || !c.spend() {
		return map[string]any{}
	}
	if q, ok := el.qname("type"); ok {
		return c.typeSchema(q, depth)
	}
	if ct := el.elem(nsXSD, "complexType"); ct != nil {
		return c.complexSchema(ct, ctx, depth)
	}
	if st := el.elem(nsXSD, "simpleType"); st != nil {
		return c.simpleSchema(st, ctx, depth)
	}
	return map[string]any{}
}

// typeSchema is the JSON Schema of a named type.
func (c *converter) typeSchema(q xml.Name, depth int) map[string]any {
	if isXSD(q.Space) {
		if s := builtin(q.Local); s != nil {
			return s
		}
		if q.Local == "Array" {
			return map[string]any{"type": "array"}
		}
	}
	d, ok := c.set.types[q]
	if !ok {
		c.notFound(q, "type")
		return map[string]any{}
	}
	if depth > maxSchemaDepth {
		return map[string]any{"type": "object"}
	}
	if d.n.name.Local == "simpleType" {
		return c.simpleSchema(d.n, d.ctx, depth)
	}
	return c.complexSchema(d.n, d.ctx, depth)
}

// simpleSchema handles restriction (with enumerations), list and union.
func (c *converter) simpleSchema(st *node, ctx *schemaCtx, depth int) map[string]any {
	r := st.elem(nsXSD, "restriction")
	if r == nil {
		if st.elem(nsXSD, "list") != nil {
			return map[string]any{"type": "string", "description": "whitespace-separated list"}
		}
		return map[string]any{"type": "string"}
	}
	s := map[string]any{"type": "string"}
	if base, ok := r.qname("base"); ok {
		s = clone(c.typeSchema(base, depth+1))
	} else if inner := r.elem(nsXSD, "simpleType"); inner != nil {
		s = clone(c.simpleSchema(inner, ctx, depth+1))
	}
	var values []string
	for _, e := range r.elems(nsXSD, "enumeration") {
		values = append(values, e.attr("value"))
	}
	if len(values) > 0 {
		s["enum"] = values
	}
	return s
}

// complexSchema is an object of a complex type's child elements; simple
// content is the schema of its base type.
func (c *converter) complexSchema(ct *node, ctx *schemaCtx, depth int) map[string]any {
	if sc := ct.elem(nsXSD, "simpleContent"); sc != nil {
		for _, d := range sc.children {
			if base, ok := d.qname("base"); ok {
				return c.typeSchema(base, depth+1)
			}
		}
		return map[string]any{}
	}
	if cc := ct.elem(nsXSD, "complexContent"); cc != nil {
		if r := cc.elem(nsXSD, "restriction"); r != nil {
			if base, ok := r.qname("base"); ok && isXSD(base.Space) && base.Local == "Array" {
				return map[string]any{"type": "array"}
			}
		}
	}
	props := map[string]any{}
	var required []string
	for _, ch := range c.children(ct, ctx, depth) {
		el, _, _ := c.element(ch.n, ch.ctx)
		if el == nil {
			continue
		}
		name := el.attr("name")
		props[name] = c.elementSchema(ch.n, ch.ctx, depth+1)
		if ch.required {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// children lists the elements of a complex type in order: an extension's
// base type's first, then those of sequence, all, choice and group
// particles. Choices' elements are never required.
func (c *converter) children(ct *node, ctx *schemaCtx, depth int) []child {
	if depth > maxSchemaDepth {
		return nil
	}
	var out []child
	content := ct
	if cc := ct.elem(nsXSD, "complexContent"); cc != nil {
		for _, d := range cc.children {
			if d.name.Space != nsXSD || (d.name.Local != "extension" && d.name.Local != "restriction") {
				continue
			}
			if base, ok := d.qname("base"); ok && d.name.Local == "extension" {
				if bd, found := c.set.types[base]; found && bd.n.name.Local == "complexType" {
					out = append(out, c.children(bd.n, bd.ctx, depth+1)...)
				} else if !found && !isXSD(base.Space) {
					c.notFound(base, "type")
				}
			}
			content = d
		}
	}
	var walk func(n *node, optional bool, depth int)
	walk = func(n *node, optional bool, depth int) {
		if depth > maxSchemaDepth {
			return
		}
		for _, p := range n.children {
			if p.name.Space != nsXSD || !c.spend() {
				continue
			}
			opt := optional || p.attr("minOccurs") == "0"
			switch p.name.Local {
			case "element":
				out = append(out, child{n: p, ctx: ctx, required: !opt})
			case "sequence", "all":
				walk(p, opt, depth+1)
			case "choice":
				walk(p, true, depth+1)
			case "group":
				if q, ok := p.qname("ref"); ok {
					if g, found := c.set.groups[q]; found {
						saved := ctx
						ctx = g.ctx
						walk(g.n, opt, depth+1)
						ctx = saved
					} else {
						c.notFound(q, "group")
					}
				}
			}
		}
	}
	walk(content, false, depth)
	return out
}

// part describes a child element as a SOAP part.
func (c *converter) part(ch child) tool.Part {
	el, _, ns := c.element(ch.n, ch.ctx)
	p := tool.Part{Namespace: ns, Required: ch.required}
	if el == nil {
		q, _ := ch.n.qname("ref")
		p.Name = q.Local
		return p
	}
	p.Name = el.attr("name")
	if q, ok := el.qname("type"); ok {
		p.Type = q.Local
	}
	return p
}

// repeats reports whether an element may occur more than once.
func repeats(el *node) bool {
	m := el.attr("maxOccurs")
	if m == "unbounded" {
		return true
	}
	n, err := strconv.Atoi(m)
	return err == nil && n > 1
}

func clone(s map[string]any) map[string]any {
	c := make(map[string]any, len(s)+1)
	for k, v := range s {
		c[k] = v
	}
	return c
}
