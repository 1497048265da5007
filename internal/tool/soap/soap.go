// Package soap imports WSDL 1.1 documents as tools: every portType
// operation bound by a SOAP 1.1 or SOAP 1.2 binding is an operation, with
// what is needed to build its envelope and JSON Schemas of its request and
// response.
//
// Imported documents (wsdl:import, xsd:import and xsd:include with a
// location) are read only through the Importer's Fetch function, which the
// service sets to its hardened client; the importer itself never dials.
package soap

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// Importer reads WSDL 1.1 documents.
type Importer struct {
	// Fetch reads an imported document by absolute URL. When nil, imports
	// with a location are not read and a warning says so.
	Fetch func(ctx context.Context, url string) ([]byte, error)
}

var _ tool.Importer = (*Importer)(nil)

// Import reads a WSDL 1.1 document. Documents that are not XML, not WSDL
// 1.1 (WSDL 2.0 included), that have no SOAP binding, or whose bound
// operations reference unknown input messages or portTypes (after the
// local-name rule of resolveRefs) are problem.SpecInvalid errors.
func (im *Importer) Import(ctx context.Context, src tool.Source) (*tool.Spec, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("import wsdl: %w", err)
	}
	root, err := parseXML(src.Data)
	if err != nil {
		var se *xml.SyntaxError
		if errors.As(err, &se) {
			return nil, problem.New(problem.SpecInvalid, "not XML: line %d: %s", se.Line, se.Msg)
		}
		if errors.Is(err, errNoRoot) {
			return nil, problem.New(problem.SpecInvalid, "not XML: no root element")
		}
		return nil, problem.New(problem.SpecInvalid, "not a WSDL document: %v", err)
	}
	switch {
	case root.name.Space == nsWSDL20 && root.name.Local == "description":
		return nil, problem.New(problem.SpecInvalid, "WSDL 2.0 is not supported: register a WSDL 1.1 document (root element wsdl:definitions)")
	case root.name.Space != nsWSDL || root.name.Local != "definitions":
		return nil, problem.New(problem.SpecInvalid, "root element {%s}%s is not a WSDL 1.1 definitions element", root.name.Space, root.name.Local)
	}
	defs := &definitions{messages: map[xml.Name]*message{}, schema: newSchemaSet()}
	l := &loader{ctx: ctx, fetch: im.Fetch, defs: defs, seen: map[string]bool{}}
	if src.URL != "" {
		l.seen[src.URL] = true
	}
	l.definitions(root, src.URL)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("import wsdl: %w", err)
	}
	budget := tool.NewBudget(len(src.Data) + l.bytes)
	b := newBuilder(defs, src.URL, budget)
	ops, err := b.operations(ctx)
	if err != nil {
		return nil, err
	}
	if w := budget.Warning(); w != "" {
		b.warn("%s", w)
	}
	return &tool.Spec{Operations: ops, BaseURL: b.baseURL, Warnings: tool.CapWarnings(defs.warnings, maxWarnings)}, nil
}

// maxWarnings bounds the warnings of one import.
const maxWarnings = 50

// isRead is the kind rule: SOAP marks no operation as safe, so an
// operation whose name starts with a reading verb (Get, List, Find, Search,
// Query, Read, Check, Fetch, Lookup, Describe, Is, Has) at a word boundary
// is a read; every other operation is a write. The verb is written
// capitalized or in lower case (GetQuote, getQuote, get_quote, Get2) and
// followed by an upper-case letter, a digit, "_" or nothing; or in capitals
// (LIST, GET_QUOTE) and followed by "_", a digit or nothing, since in a name
// in capitals no boundary can be seen (CHECKOUT, ISSUEREFUND and HASHPASSWORD
// are writes, as are IssueRefund, Hashes and Is.Delete).
func isRead(name string) bool {
	for _, verb := range []string{"Get", "List", "Find", "Search", "Query", "Read", "Check", "Fetch", "Lookup", "Describe", "Is", "Has"} {
		for _, form := range []string{verb, strings.ToLower(verb), strings.ToUpper(verb)} {
			rest, ok := strings.CutPrefix(name, form)
			if !ok {
				continue
			}
			if rest == "" {
				return true
			}
			r, _ := utf8.DecodeRuneInString(rest)
			if r == '_' || unicode.IsDigit(r) || unicode.IsUpper(r) && form != strings.ToUpper(verb) {
				return true
			}
		}
	}
	return false
}
