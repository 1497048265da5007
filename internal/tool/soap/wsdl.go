package soap

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/url"
	"strings"
)

// Namespaces of WSDL 1.1, its SOAP bindings, XML Schema and WSDL 2.0.
const (
	nsWSDL   = "http://schemas.xmlsoap.org/wsdl/"
	nsSOAP11 = "http://schemas.xmlsoap.org/wsdl/soap/"
	nsSOAP12 = "http://schemas.xmlsoap.org/wsdl/soap12/"
	nsXSD    = "http://www.w3.org/2001/XMLSchema"
	nsWSDL20 = "http://www.w3.org/ns/wsdl"
)

// maxDocuments bounds the documents one import reads, imports included.
const maxDocuments = 32

// definitions is what the WSDL documents define, merged.
type definitions struct {
	tns       string
	messages  map[xml.Name]*message
	portTypes []*portType
	bindings  []*binding
	ports     []*port
	schema    *schemaSet
	// unfetched lists import locations that were not read.
	unfetched []string
	warnings  []string
}

type message struct {
	parts []part
}

type part struct {
	name    string
	element xml.Name
	typ     xml.Name
}

type portType struct {
	name xml.Name
	ops  []*abstractOp
}

type abstractOp struct {
	name, doc     string
	input, output xml.Name
	hasInput      bool
	hasOutput     bool
}

type binding struct {
	name     xml.Name
	portType xml.Name
	// version is "1.1" or "1.2"; "" for a binding that is not SOAP.
	version string
	style   string
	ops     map[string]*boundOp
}

type boundOp struct {
	action, style string
	input, output body
}

// body is a soap:body of a bound input or output.
type body struct {
	namespace string
	// parts restricts the message parts in the body when not nil.
	parts []string
}

type port struct {
	binding xml.Name
	address string
}

// loader reads a WSDL document and the documents it imports.
type loader struct {
	ctx   context.Context
	fetch func(ctx context.Context, url string) ([]byte, error)
	defs  *definitions
	seen  map[string]bool
	docs  int
	// bytes counts the bytes of the imported documents read.
	bytes int
}

func (l *loader) warn(format string, args ...any) {
	l.defs.warnings = append(l.defs.warnings, fmt.Sprintf(format, args...))
}

// definitions reads a wsdl:definitions element found at base.
func (l *loader) definitions(root *node, base string) {
	l.docs++
	tns := root.attr("targetNamespace")
	if l.defs.tns == "" {
		l.defs.tns = tns
	}
	for _, c := range root.children {
		if c.name.Space != nsWSDL {
			continue
		}
		switch c.name.Local {
		case "import":
			l.importDoc(c.attr("location"), base)
		case "types":
			for _, s := range c.elems(nsXSD, "schema") {
				l.schema(s, base)
			}
		case "message":
			l.message(c, tns)
		case "portType":
			pt := &portType{name: xml.Name{Space: tns, Local: c.attr("name")}}
			for _, o := range c.elems(nsWSDL, "operation") {
				op := &abstractOp{name: o.attr("name"), doc: o.documentation()}
				if in := o.elem(nsWSDL, "input"); in != nil {
					op.input, op.hasInput = l.ref(in, "message")
				}
				if out := o.elem(nsWSDL, "output"); out != nil {
					op.output, op.hasOutput = l.ref(out, "message")
				}
				pt.ops = append(pt.ops, op)
			}
			l.defs.portTypes = append(l.defs.portTypes, pt)
		case "binding":
			l.binding(c, tns)
		case "service":
			for _, p := range c.elems(nsWSDL, "port") {
				bn, _ := l.ref(p, "binding")
				pp := &port{binding: bn}
				for _, ns := range []string{nsSOAP11, nsSOAP12} {
					if a := p.elem(ns, "address"); a != nil {
						pp.address = a.attr("location")
					}
				}
				l.defs.ports = append(l.defs.ports, pp)
			}
		}
	}
}

// ref resolves a QName attribute, warning about an undeclared prefix.
func (l *loader) ref(n *node, attr string) (xml.Name, bool) {
	q, ok := n.qname(attr)
	if !ok && n.attr(attr) != "" {
		l.warn("%s %q: undeclared namespace prefix", attr, n.attr(attr))
	}
	return q, ok
}

func (l *loader) message(n *node, tns string) {
	m := &message{}
	for _, p := range n.elems(nsWSDL, "part") {
		pt := part{name: p.attr("name")}
		pt.element, _ = l.ref(p, "element")
		pt.typ, _ = l.ref(p, "type")
		m.parts = append(m.parts, pt)
	}
	l.defs.messages[xml.Name{Space: tns, Local: n.attr("name")}] = m
}

func (l *loader) binding(n *node, tns string) {
	b := &binding{name: xml.Name{Space: tns, Local: n.attr("name")}, ops: map[string]*boundOp{}}
	b.portType, _ = l.ref(n, "type")
	ns := ""
	for _, v := range []struct{ ns, version string }{{nsSOAP11, "1.1"}, {nsSOAP12, "1.2"}} {
		if sb := n.elem(v.ns, "binding"); sb != nil {
			ns, b.version, b.style = v.ns, v.version, sb.attr("style")
			break
		}
	}
	for _, o := range n.elems(nsWSDL, "operation") {
		op := &boundOp{}
		if ns != "" {
			if so := o.elem(ns, "operation"); so != nil {
				op.action, op.style = so.attr("soapAction"), so.attr("style")
			}
			op.input = soapBody(o.elem(nsWSDL, "input"), ns)
			op.output = soapBody(o.elem(nsWSDL, "output"), ns)
		}
		b.ops[o.attr("name")] = op
	}
	l.defs.bindings = append(l.defs.bindings, b)
}

func soapBody(n *node, ns string) body {
	if n == nil {
		return body{}
	}
	sb := n.elem(ns, "body")
	if sb == nil {
		return body{}
	}
	b := body{namespace: sb.attr("namespace")}
	if _, ok := attrPresent(sb, "parts"); ok {
		b.parts = strings.Fields(sb.attr("parts"))
	}
	return b
}

func attrPresent(n *node, local string) (string, bool) {
	for _, a := range n.attrs {
		if a.Name.Space == "" && a.Name.Local == local {
			return a.Value, true
		}
	}
	return "", false
}

// schema indexes an xsd:schema and reads the schemas it imports or
// includes by location.
func (l *loader) schema(s *node, base string) {
	l.defs.schema.add(s)
	for _, c := range s.children {
		if c.name.Space == nsXSD && (c.name.Local == "import" || c.name.Local == "include" || c.name.Local == "redefine") {
			if loc := c.attr("schemaLocation"); loc != "" {
				l.importDoc(loc, base)
			}
		}
	}
}

// importDoc reads an imported document (a WSDL or a schema) through the
// fetch function; with none, the import is only recorded. Documents are read
// once each, at most maxDocuments in all.
func (l *loader) importDoc(location, base string) {
	if location == "" {
		return
	}
	u, err := resolve(base, location)
	if err != nil {
		l.warn("import %q: %v", location, err)
		l.defs.unfetched = append(l.defs.unfetched, location)
		return
	}
	if l.seen[u] {
		return
	}
	l.seen[u] = true
	if l.fetch == nil {
		l.warn("import %s not read: the importer fetches no documents", u)
		l.defs.unfetched = append(l.defs.unfetched, u)
		return
	}
	if l.docs >= maxDocuments {
		l.warn("import %s not read: over %d documents", u, maxDocuments)
		l.defs.unfetched = append(l.defs.unfetched, u)
		return
	}
	data, err := l.fetch(l.ctx, u)
	if err == nil && l.ctx.Err() != nil {
		err = l.ctx.Err()
	}
	if err != nil {
		l.warn("import %s not read: %v", u, err)
		l.defs.unfetched = append(l.defs.unfetched, u)
		return
	}
	l.bytes += len(data)
	root, err := parseXML(data)
	if err != nil {
		l.warn("import %s is not XML: %v", u, err)
		l.defs.unfetched = append(l.defs.unfetched, u)
		return
	}
	switch root.name {
	case xml.Name{Space: nsWSDL, Local: "definitions"}:
		l.definitions(root, u)
	case xml.Name{Space: nsXSD, Local: "schema"}:
		l.docs++
		l.schema(root, u)
	default:
		l.warn("import %s is neither a WSDL 1.1 nor an XML Schema document", u)
	}
}

// resolve makes location absolute against base.
func resolve(base, location string) (string, error) {
	ref, err := url.Parse(location)
	if err != nil {
		return "", fmt.Errorf("bad location: %w", err)
	}
	if ref.IsAbs() {
		return ref.String(), nil
	}
	if base == "" {
		return "", fmt.Errorf("relative location in a document with no URL")
	}
	b, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("bad base URL: %w", err)
	}
	return b.ResolveReference(ref).String(), nil
}
