package soap

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// builder turns bound portType operations into operations.
type builder struct {
	defs    *definitions
	base    string
	baseURL string
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
func (b *builder) operations() ([]tool.Operation, error) {
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
			return nil, b.invalid("binding %s references portType %s, which is not defined", bn.name.Local, bn.portType.Local)
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
	ops := make([]tool.Operation, 0, len(all))
	for _, c := range all {
		id := c.op.name
		if len(owners[id]) > 1 {
			id = c.pt.name.Local + "_" + id
		}
		for n := 2; taken[id]; n++ {
			id = fmt.Sprintf("%s_%s_%d", c.pt.name.Local, c.op.name, n)
		}
		taken[id] = true
		op, err := b.operation(id, c)
		if err != nil {
			return nil, err
		}
		used[c.b.name] = true
		ops = append(ops, op)
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

// operation builds one operation from its binding and messages.
func (b *builder) operation(id string, c bound) (tool.Operation, error) {
	in, err := b.message(c, c.op.input, c.op.hasInput, "input")
	if err != nil {
		return tool.Operation{}, err
	}
	out, err := b.message(c, c.op.output, c.op.hasOutput, "output")
	if err != nil {
		return tool.Operation{}, err
	}
	style := firstNonEmpty(c.bop.style, c.b.style, "document")
	sb := &tool.SOAPBinding{Version: c.b.version, Action: c.bop.action, Style: style, Endpoint: c.endpoint}
	conv := &converter{set: b.defs.schema, warn: b.warn, budget: maxSchemaNodes}
	inParts, outParts := bodyParts(in, c.bop.input.parts), bodyParts(out, c.bop.output.parts)
	var input, output map[string]any
	if style == "rpc" || !elementParts(inParts) {
		if style != "rpc" {
			b.warn("operation %s: document style with type parts, sent as a wrapper element named after the operation", id)
		}
		sb.Namespace = firstNonEmpty(c.bop.input.namespace, b.defs.tns)
		sb.Element = c.op.name
		sb.Parts, input = b.rpcParts(conv, inParts)
		sb.ResponseElement = c.op.name + "Response"
		conv.budget = maxSchemaNodes
		_, output = b.rpcParts(conv, outParts)
	} else {
		if len(inParts) > 1 {
			b.warn("operation %s: the input has %d body parts; only the first is sent", id, len(inParts))
		}
		el := inParts[0].element
		sb.Namespace, sb.Element = el.Space, el.Local
		sb.Parts, input = b.documentBody(conv, el)
		if len(outParts) > 0 && outParts[0].element.Local != "" {
			sb.ResponseElement = outParts[0].element.Local
			conv.budget = maxSchemaNodes
			_, output = b.documentBody(conv, outParts[0].element)
		}
	}
	op := tool.Operation{
		ID:          id,
		Kind:        tool.Write,
		Summary:     tool.FirstLine(c.op.doc),
		Description: c.op.doc,
		Input:       mustJSON(input),
		SOAP:        sb,
	}
	if isRead(c.op.name) {
		op.Kind = tool.Read
	}
	if output != nil {
		op.Output = mustJSON(output)
	}
	return op, nil
}

// message finds an operation's input or output message.
func (b *builder) message(c bound, name xml.Name, present bool, which string) (*message, error) {
	if !present {
		return &message{}, nil
	}
	m := b.defs.messages[name]
	if m == nil {
		return nil, b.invalid("operation %s of portType %s: %s message %s is not defined", c.op.name, c.pt.name.Local, which, name.Local)
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

// rpcParts describes message parts as the children of the wrapper element,
// with the JSON Schema of an object of them.
func (b *builder) rpcParts(conv *converter, parts []part) ([]tool.Part, map[string]any) {
	props := map[string]any{}
	var out []tool.Part
	var required []string
	for _, p := range parts {
		tp := tool.Part{Name: p.name, Required: true}
		switch {
		case p.typ.Local != "":
			tp.Type = p.typ.Local
			props[p.name] = conv.typeSchema(p.typ, 1)
		case p.element.Local != "":
			if d, ok := b.defs.schema.elements[p.element]; ok {
				props[p.name] = conv.elementType(d.n, d.ctx, 1)
				if q, ok := d.n.qname("type"); ok {
					tp.Type = q.Local
				}
			} else {
				conv.notFound(p.element, "element")
				props[p.name] = map[string]any{}
			}
		default:
			props[p.name] = map[string]any{}
		}
		out = append(out, tp)
		required = append(required, p.name)
	}
	return out, object(props, required)
}

// documentBody describes a body element's children as parts, with the JSON
// Schema of an object of them. An element of simple type is its own part.
func (b *builder) documentBody(conv *converter, el xml.Name) ([]tool.Part, map[string]any) {
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
