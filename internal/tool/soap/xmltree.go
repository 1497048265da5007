package soap

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Limits on a parsed document; the caller limits its size in bytes.
const (
	maxXMLDepth    = 128
	maxXMLElements = 1 << 20
	maxTextBytes   = 4 << 10
)

// node is one element of a parsed XML document, with the namespace
// declarations in scope, which QName attribute values need.
type node struct {
	name     xml.Name
	attrs    []xml.Attr
	ns       map[string]string
	children []*node
	text     strings.Builder
}

// Errors of parseXML besides the decoder's.
var (
	errXMLLimit = errors.New("document nests too deeply or has too many elements")
	errNoRoot   = errors.New("no root element")
)

// parseXML reads a document into a tree.
func parseXML(data []byte) (*node, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.CharsetReader = charsetReader
	var (
		stack []*node
		root  *node
		count int
	)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			count++
			if len(stack) >= maxXMLDepth || count > maxXMLElements {
				return nil, errXMLLimit
			}
			n := &node{name: t.Name}
			var parent *node
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
				n.ns = parent.ns
			}
			n.ns = scope(n.ns, t.Attr)
			for _, a := range t.Attr {
				if a.Name.Space != "xmlns" && !(a.Name.Space == "" && a.Name.Local == "xmlns") {
					n.attrs = append(n.attrs, a)
				}
			}
			if parent != nil {
				parent.children = append(parent.children, n)
			} else if root != nil {
				return nil, errors.New("more than one root element")
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				if n := stack[len(stack)-1]; n.text.Len() < maxTextBytes {
					n.text.Write(t)
				}
			}
		}
	}
	if root == nil {
		return nil, errNoRoot
	}
	return root, nil
}

// scope returns the namespace declarations in scope after attrs, sharing
// the parent's map when attrs declare none.
func scope(parent map[string]string, attrs []xml.Attr) map[string]string {
	var m map[string]string
	for _, a := range attrs {
		prefix, ok := "", false
		switch {
		case a.Name.Space == "xmlns":
			prefix, ok = a.Name.Local, true
		case a.Name.Space == "" && a.Name.Local == "xmlns":
			ok = true
		}
		if !ok {
			continue
		}
		if m == nil {
			m = make(map[string]string, len(parent)+1)
			for k, v := range parent {
				m[k] = v
			}
		}
		m[prefix] = a.Value
	}
	if m == nil {
		return parent
	}
	return m
}

// attr returns the value of an unqualified attribute.
func (n *node) attr(local string) string {
	for _, a := range n.attrs {
		if a.Name.Space == "" && a.Name.Local == local {
			return strings.TrimSpace(a.Value)
		}
	}
	return ""
}

// qname resolves a QName-valued attribute against the declarations in scope;
// an unprefixed name is in the default namespace. It reports false when the
// attribute is absent or its prefix is undeclared.
func (n *node) qname(local string) (xml.Name, bool) {
	v := n.attr(local)
	if v == "" {
		return xml.Name{}, false
	}
	prefix, name, found := strings.Cut(v, ":")
	if !found {
		return xml.Name{Space: n.ns[""], Local: v}, true
	}
	uri, ok := n.ns[prefix]
	if !ok && prefix == "xml" {
		uri, ok = "http://www.w3.org/XML/1998/namespace", true
	}
	return xml.Name{Space: uri, Local: name}, ok
}

// elems returns the children named {space}local.
func (n *node) elems(space, local string) []*node {
	var out []*node
	for _, c := range n.children {
		if c.name.Local == local && c.name.Space == space {
			out = append(out, c)
		}
	}
	return out
}

// elem returns the first child named {space}local, or nil.
func (n *node) elem(space, local string) *node {
	for _, c := range n.children {
		if c.name.Local == local && c.name.Space == space {
			return c
		}
	}
	return nil
}

// documentation returns the text of a wsdl:documentation child.
func (n *node) documentation() string {
	if d := n.elem(nsWSDL, "documentation"); d != nil {
		return strings.TrimSpace(d.text.String())
	}
	return ""
}

// charsetReader accepts the single-byte encodings old WSDLs declare besides UTF-8.
func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "utf-8", "utf8":
		return input, nil
	case "us-ascii", "ascii", "iso-8859-1", "latin1", "iso_8859-1", "windows-1252", "cp1252":
		data, err := io.ReadAll(input)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, 0, len(data))
		for _, b := range data {
			buf = utf8.AppendRune(buf, rune(b))
		}
		return bytes.NewReader(buf), nil
	}
	return nil, fmt.Errorf("unsupported encoding %q", charset)
}
