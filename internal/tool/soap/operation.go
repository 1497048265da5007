package soap

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// builder turns bound portType operations into operations. What they
// store is charged to budget, and the schema nodes converted for them to
// nodes; a body element's parts and schema are converted once, for every
// operation that sends or receives it.
type builder struct {
	defs    *definitions
	base    string
	baseURL string

	budget *tool.Budget
	// nodes is what is left of maxDocumentNodes.
	nodes   int
	missing map[xml.Name]bool
	bodies  map[xml.Name]*elementBody
}

// elementBody is a body element's parts and, once built, its schema.
type elementBody struct {
	parts  []tool.Part
	schema map[string]any
}

func newBuilder(defs *definitions, base string, budget *tool.Budget) *builder {
	return &builder{
		defs: defs, base: base, budget: budget,
		nodes: maxDocumentNodes, missing: map[xml.Name]bool{}, bodies: map[xml.Name]*elementBody{},
	}
}

// converter returns a converter with a message's node budget.
func (b *builder) converter() *converter {
	return &converter{set: b.defs.schema, warn: b.warn, missing: b.missing, budget: maxSchemaNodes, nodes: &b.nodes}
}

func (b *builder) warn(format string, args ...any) {
	b.defs.warnings = append(b.defs.warnings, fmt.Sprintf(format, args...))
}

// bound is a portType operation with the binding chosen to call it.
type bound struct {
	pt       *portType
	op       *abstractOp
	b        *binding
	bop      *boundOp
	endpoint string
}

// better reports whether c is a better way to call an operation than d.
// A binding with a port address wins; between equals, SOAP 1.1 wins over
// 1.2, since every server that offers both accepts 1.1 and its SOAPAction
// header is what older servers route on. Either way the operation counts once.
func (c bound) better(d bound) bool {
	if (c.endpoint != "") != (d.endpoint != "") {
		return c.endpoint != ""
	}
	return c.b.version == "1.1" && d.b.version != "1.1"
}

// operations lists the bound operations in the order of their portTypes.
// Every operation's binding is found before any schema is converted, so
// that schemas take only what bindings leave of the budget.
func (b *builder) operations(ctx context.Context) ([]tool.Operation, error) {
	if err := b.resolveRefs(); err != nil {
		return nil, err
	}
	d := b.defs
	portTypes := map[xml.Name]*portType{}
	for _, pt := range d.portTypes {
		if _, dup := portTypes[pt.name]; !dup {
			portTypes[pt.name] = pt
		}
	}
	var soapBindings []*binding
	for _, bn := range d.bindings {
		if bn.version == "" {
			continue
		}
		pt := portTypes[bn.portType]
		if pt == nil {
			return nil, b.invalid("binding %s references portType %s, which is not defined (looked for %s, then for any portType named %s)",
				bn.name.Local, bn.portType.Local, braced(bn.portType), bn.portType.Local)
		}
		for name := range bn.ops {
			if !hasOp(pt, name) {
				b.warn("binding %s binds operation %s, which portType %s does not have", bn.name.Local, name, pt.name.Local)
			}
		}
		soapBindings = append(soapBindings, bn)
	}
	if len(soapBindings) == 0 {
		return nil, problem.New(problem.SpecInvalid, "the WSDL has no SOAP 1.1 or SOAP 1.2 binding: none of its operations can be called")
	}
	var all []bound
	owners := map[string]map[xml.Name]bool{}
	for _, pt := range d.portTypes {
		seen := map[string]bool{}
		for _, op := range pt.ops {
			var best bound
			for _, bn := range soapBindings {
				if bn.portType != pt.name || bn.ops[op.name] == nil {
					continue
				}
				c := bound{pt: pt, op: op, b: bn, bop: bn.ops[op.name], endpoint: b.endpoint(bn)}
				if best.b == nil || c.better(best) {
					best = c
				}
			}
			if best.b == nil {
				continue
			}
			if op.name == "" {
				b.warn("portType %s has an operation without a name: not indexed", pt.name.Local)
				continue
			}
			if seen[op.name] {
				b.warn("portType %s overloads operation %s: only the first is indexed", pt.name.Local, op.name)
				continue
			}
			seen[op.name] = true
			if owners[op.name] == nil {
				owners[op.name] = map[xml.Name]bool{}
			}
			owners[op.name][pt.name] = true
			all = append(all, best)
		}
	}
	used, taken := map[xml.Name]bool{}, map[string]bool{}
	drafts := make([]draft, 0, len(all))
	for _, c := range all {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("import wsdl: %w", err)
		}
		id := c.op.name
		if len(owners[id]) > 1 {
			id = c.pt.name.Local + "_" + id
		}
		for n := 2; taken[id]; n++ {
			id = fmt.Sprintf("%s_%s_%d", c.pt.name.Local, c.op.name, n)
		}
		taken[id] = true
		d, err := b.operation(id, c)
		if err != nil {
			return nil, err
		}
		used[c.b.name] = true
		drafts = append(drafts, d)
	}
	ops := make([]tool.Operation, len(drafts))
	for i, d := range drafts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("import wsdl: %w", err)
		}
		d.op.Input, d.op.Output = b.schemas(d)
		ops[i] = d.op
	}
	for _, p := range d.ports {
		if used[p.binding] && p.address != "" {
			b.baseURL = b.address(p.address)
			break
		}
	}
	return ops, nil
}

func hasOp(pt *portType, name string) bool {
	for _, op := range pt.ops {
		if op.name == name {
			return true
		}
	}
	return false
}

// invalid is a SpecInvalid error that names the imports not read, which
// may define what is missing.
func (b *builder) invalid(format string, args ...any) error {
	detail := fmt.Sprintf(format, args...)
	if len(b.defs.unfetched) > 0 {
		detail += " (imports not read: " + strings.Join(b.defs.unfetched, ", ") + ")"
	}
	return problem.New(problem.SpecInvalid, "%s", detail)
}

// endpoint is the address of the first port that uses bn.
func (b *builder) endpoint(bn *binding) string {
	for _, p := range b.defs.ports {
		if p.binding == bn.name && p.address != "" {
			return b.address(p.address)
		}
	}
	return ""
}

// address resolves a port address against the document's URL.
func (b *builder) address(a string) string {
	if u, err := resolve(b.base, a); err == nil {
		return u
	}
	return a
}

// draft is an operation whose schemas are not built yet: in builds its
// input schema, out its output schema (nil when it has none).
type draft struct {
	op      tool.Operation
	in, out func() map[string]any
}

// operation builds one operation's binding from its binding and messages.
func (b *builder) operation(id string, c bound) (draft, error) {
	in, err := b.message(c, c.op.input, c.op.hasInput, "input")
	if err != nil {
		return draft{}, err
	}
	out, err := b.message(c, c.op.output, c.op.hasOutput, "output")
	if err != nil {
		return draft{}, err
	}
	style := firstNonEmpty(c.bop.style, c.b.style, "document")
	sb := &tool.SOAPBinding{Version: c.b.version, Action: c.bop.action, Style: style, Endpoint: c.endpoint}
	d := draft{op: tool.Operation{
		ID:          id,
		Kind:        tool.Write,
		Summary:     tool.FirstLine(c.op.doc),
		Description: c.op.doc,
		SOAP:        sb,
	}}
	if isRead(c.op.name) {
		d.op.Kind = tool.Read
	}
	inParts, outParts := bodyParts(in, c.bop.input.parts), bodyParts(out, c.bop.output.parts)
	if style == "rpc" || !elementParts(inParts) {
		if style != "rpc" {
			b.warn("operation %s: document style with type parts, sent as a wrapper element named after the operation", id)
		}
		sb.Namespace = firstNonEmpty(c.bop.input.namespace, b.defs.tns)
		sb.Element = c.op.name
		sb.Parts = b.rpcParts(inParts)
		sb.ResponseElement = c.op.name + "Response"
		d.in = func() map[string]any { return b.rpcSchema(b.converter(), inParts) }
		d.out = func() map[string]any { return b.rpcSchema(b.converter(), outParts) }
	} else {
		if len(inParts) > 1 {
			b.warn("operation %s: the input has %d body parts; only the first is sent", id, len(inParts))
		}
		el := inParts[0].element
		sb.Namespace, sb.Element = el.Space, el.Local
		sb.Parts = b.body(el).parts
		d.in = func() map[string]any { return b.bodySchema(el) }
		if len(outParts) > 0 && outParts[0].element.Local != "" {
			outEl := outParts[0].element
			sb.ResponseElement = outEl.Local
			d.out = func() map[string]any { return b.bodySchema(outEl) }
		}
	}
	if b.nodes < 0 {
		return draft{}, problem.New(problem.SpecTooLarge, "finding the operations' parts takes more than %d schema nodes", maxDocumentNodes)
	}
	size := 0
	for _, p := range sb.Parts {
		size += len(p.Name) + len(p.Namespace) + len(p.Type) + partJSON
	}
	if err := b.budget.Operation(size, "parts"); err != nil {
		return draft{}, err
	}
	return d, nil
}

// partJSON is about what a tool.Part's JSON adds to its strings.
const partJSON = 50

// schemas builds and encodes an operation's schemas, or gives it stubs once
// the budget or maxDocumentNodes is spent.
func (b *builder) schemas(d draft) (json.RawMessage, json.RawMessage) {
	if !b.budget.Full() {
		in := d.in()
		var out map[string]any
		if d.out != nil {
			out = d.out()
		}
		if b.nodes >= 0 {
			return b.budget.Schemas(in, out)
		}
		b.budget.Stop(fmt.Sprintf("converting them takes more than %d schema nodes", maxDocumentNodes))
	}
	return b.budget.Stubs(d.out != nil)
}

// message finds an operation's input or output message.
func (b *builder) message(c bound, name xml.Name, present bool, which string) (*message, error) {
	if !present {
		return &message{}, nil
	}
	m := b.defs.messages[name]
	if m == nil && which == "output" {
		// The call can still be made and its answer read; only the
		// answer's schema is unknown.
		b.warn("operation %s of portType %s: output message %s is not defined (looked for %s, then for any message named %s): indexed with an unknown output",
			c.op.name, c.pt.name.Local, name.Local, braced(name), name.Local)
		return &message{}, nil
	}
	if m == nil {
		return nil, b.invalid("operation %s of portType %s: %s message %s is not defined (looked for %s, then for any message named %s)",
			c.op.name, c.pt.name.Local, which, name.Local, braced(name), name.Local)
	}
	return m, nil
}

// bodyParts are the parts of m that soap:body puts in the body: those it
// names, or all.
func bodyParts(m *message, names []string) []part {
	if names == nil {
		return m.parts
	}
	var out []part
	for _, p := range m.parts {
		for _, n := range names {
			if p.name == n {
				out = append(out, p)
			}
		}
	}
	return out
}

func elementParts(parts []part) bool {
	return len(parts) > 0 && parts[0].element.Local != ""
}

// rpcParts describes message parts as the children of the wrapper element.
func (b *builder) rpcParts(parts []part) []tool.Part {
	var out []tool.Part
	for _, p := range parts {
		tp := tool.Part{Name: p.name, Required: true}
		switch {
		case p.typ.Local != "":
			tp.Type = p.typ.Local
		case p.element.Local != "":
			if d, ok := b.defs.schema.elements[p.element]; ok {
				if q, ok := d.n.qname("type"); ok {
					tp.Type = q.Local
				}
			} else {
				b.converter().notFound(p.element, "element")
			}
		}
		out = append(out, tp)
	}
	return out
}

// rpcSchema is the JSON Schema of an object of message parts.
func (b *builder) rpcSchema(conv *converter, parts []part) map[string]any {
	props := map[string]any{}
	var required []string
	for _, p := range parts {
		switch {
		case p.typ.Local != "":
			props[p.name] = conv.typeSchema(p.typ, 1)
		case p.element.Local != "":
			if d, ok := b.defs.schema.elements[p.element]; ok {
				props[p.name] = conv.elementType(d.n, d.ctx, 1)
			} else {
				conv.notFound(p.element, "element")
				props[p.name] = map[string]any{}
			}
		default:
			props[p.name] = map[string]any{}
		}
		required = append(required, p.name)
	}
	return object(props, required)
}

// body returns a body element's parts.
func (b *builder) body(el xml.Name) *elementBody {
	if eb, ok := b.bodies[el]; ok {
		return eb
	}
	parts, _ := b.documentBody(b.converter(), el, false)
	eb := &elementBody{parts: parts}
	b.bodies[el] = eb
	return eb
}

// bodySchema returns a body element's schema.
func (b *builder) bodySchema(el xml.Name) map[string]any {
	eb := b.body(el)
	if eb.schema == nil {
		_, eb.schema = b.documentBody(b.converter(), el, true)
	}
	return eb.schema
}

// documentBody describes a body element's children as parts and, when
// schema is set, gives the JSON Schema of an object of them. An element of
// simple type is its own part.
func (b *builder) documentBody(conv *converter, el xml.Name, schema bool) ([]tool.Part, map[string]any) {
	d, ok := b.defs.schema.elements[el]
	if !ok {
		conv.notFound(el, "element")
		return nil, map[string]any{"type": "object"}
	}
	ct := d.n.elem(nsXSD, "complexType")
	ctx := d.ctx
	if q, ok := d.n.qname("type"); ok {
		if td, found := b.defs.schema.types[q]; found && td.n.name.Local == "complexType" {
			ct, ctx = td.n, td.ctx
		} else if found || isXSD(q.Space) {
			p := tool.Part{Name: el.Local, Namespace: el.Space, Type: q.Local, Required: true}
			if !schema {
				return []tool.Part{p}, nil
			}
			return []tool.Part{p}, object(map[string]any{el.Local: conv.typeSchema(q, 1)}, []string{el.Local})
		} else {
			conv.notFound(q, "type")
		}
	}
	if ct == nil {
		return nil, map[string]any{"type": "object"}
	}
	var parts []tool.Part
	for _, ch := range conv.children(ct, ctx, 0) {
		parts = append(parts, conv.part(ch))
	}
	if !schema {
		return parts, nil
	}
	return parts, conv.complexSchema(ct, ctx, 0)
}

func object(props map[string]any, required []string) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
