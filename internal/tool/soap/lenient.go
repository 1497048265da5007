package soap

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strings"
)

// Real WSDL files often reference their own definitions by a name whose
// namespace is wrong when read strictly: an unprefixed type="PortType"
// under xmlns="http://schemas.xmlsoap.org/wsdl/" names a portType in the
// WSDL namespace, and with no default namespace at all it names one in no
// namespace. SOAP clients read such a name as the document's own
// definition of that local name, and so does resolveRefs: a reference that
// does not resolve where it points, but whose local name matches exactly
// one definition of the right kind, is taken to mean that definition, with
// a warning. Two or more candidates are an error that lists them; none is
// what each reference's own rule says.

// lookup resolves one kind of reference against the definitions of that kind.
type lookup struct {
	kind  string // "portType", "message", …
	names []xml.Name
}

func (l lookup) has(q xml.Name) bool { return slices.Contains(l.names, q) }

// resolve returns the definition q means: q itself when defined, else the
// only definition with q's local name (ok, with a warning), else !ok.
// ambiguous lists the candidates when there are several.
func (l lookup) resolve(q xml.Name) (got xml.Name, ok bool, ambiguous []xml.Name) {
	if l.has(q) {
		return q, true, nil
	}
	for _, n := range l.names {
		if n.Local == q.Local && !slices.Contains(ambiguous, n) {
			ambiguous = append(ambiguous, n)
		}
	}
	if len(ambiguous) == 1 {
		return ambiguous[0], true, nil
	}
	return q, false, ambiguous
}

// braced writes a name as {namespace}local; "{}" is no namespace.
func braced(q xml.Name) string { return "{" + q.Space + "}" + q.Local }

func bracedList(qs []xml.Name) string {
	s := make([]string, len(qs))
	for i, q := range qs {
		s[i] = braced(q)
	}
	return strings.Join(s, ", ")
}

// resolveRefs rewrites the references of the loaded definitions that do
// not resolve strictly but name exactly one definition of their kind by
// local name, warning about each; an ambiguous one is an error. References
// that resolve to nothing are left for the builder, whose errors say
// where they looked.
func (b *builder) resolveRefs() error {
	d := b.defs
	portTypes := lookup{kind: "portType"}
	for _, pt := range d.portTypes {
		portTypes.names = append(portTypes.names, pt.name)
	}
	messages := lookup{kind: "message"}
	for n := range d.messages {
		messages.names = append(messages.names, n)
	}
	slices.SortFunc(messages.names, func(a, b xml.Name) int { return strings.Compare(braced(a), braced(b)) })
	bindings := lookup{kind: "binding"}
	for _, bn := range d.bindings {
		bindings.names = append(bindings.names, bn.name)
	}
	elements, types := lookup{kind: "element"}, lookup{kind: "type"}
	for n := range d.schema.elements {
		elements.names = append(elements.names, n)
	}
	for n := range d.schema.types {
		types.names = append(types.names, n)
	}
	for _, l := range []*lookup{&elements, &types} {
		slices.SortFunc(l.names, func(a, b xml.Name) int { return strings.Compare(braced(a), braced(b)) })
	}

	fix := func(ref *xml.Name, l lookup, where, attr string) error {
		got, ok, amb := l.resolve(*ref)
		switch {
		case len(amb) > 1:
			return b.invalid("%s: %s %q matches %d %s definitions by its local name: %s; prefix it with the namespace meant",
				where, attr, ref.Local, len(amb), l.kind, bracedList(amb))
		case ok && got != *ref:
			b.warn("%s: %s %q names %s, which is not defined; taken to mean %s %s, the only %s of that name",
				where, attr, ref.Local, braced(*ref), l.kind, braced(got), l.kind)
			*ref = got
		}
		return nil
	}
	for _, bn := range d.bindings {
		if bn.portType.Local == "" {
			continue
		}
		if err := fix(&bn.portType, portTypes, "binding "+bn.name.Local, "type"); err != nil {
			return err
		}
	}
	for _, pt := range d.portTypes {
		for _, op := range pt.ops {
			where := fmt.Sprintf("operation %s of portType %s", op.name, pt.name.Local)
			if op.hasInput {
				if err := fix(&op.input, messages, where, "input message"); err != nil {
					return err
				}
			}
			if op.hasOutput {
				if err := fix(&op.output, messages, where, "output message"); err != nil {
					return err
				}
			}
		}
	}
	for _, name := range messages.names {
		m := d.messages[name]
		for i := range m.parts {
			p := &m.parts[i]
			where := fmt.Sprintf("part %s of message %s", p.name, name.Local)
			if p.element.Local != "" && !isXSD(p.element.Space) {
				if err := fix(&p.element, elements, where, "element"); err != nil {
					return err
				}
			}
			if p.typ.Local != "" && !isXSD(p.typ.Space) {
				if err := fix(&p.typ, types, where, "type"); err != nil {
					return err
				}
			}
		}
	}
	for _, p := range d.ports {
		if p.binding.Local == "" {
			continue
		}
		if err := fix(&p.binding, bindings, "port of binding "+p.binding.Local, "binding"); err != nil {
			return err
		}
	}
	return nil
}
