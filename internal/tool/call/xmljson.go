package call

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
)

// xsiNS is the XML Schema instance namespace (xsi:nil).
const xsiNS = "http://www.w3.org/2001/XMLSchema-instance"

// maxXMLDepth bounds nesting, so a hostile answer cannot exhaust the stack.
const maxXMLDepth = 256

// xnode is an element of a parsed XML document.
type xnode struct {
	name     xml.Name
	attrs    []xml.Attr
	children []*xnode
	chars    strings.Builder
}

// parseXML parses a document into its root element.
func parseXML(data []byte) (*xnode, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []*xnode
	var root *xnode
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if len(stack) == maxXMLDepth {
				return nil, errors.New("xml nested too deeply")
			}
			n := &xnode{name: tok.Name, attrs: tok.Copy().Attr}
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				parent.children = append(parent.children, n)
			} else if root == nil {
				root = n
			} else {
				return nil, errors.New("xml has more than one root element")
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].chars.Write(tok)
			}
		}
	}
	if root == nil {
		return nil, errors.New("xml has no root element")
	}
	return root, nil
}

// child returns the first child element with the local name, or nil.
func (n *xnode) child(local string) *xnode {
	for _, c := range n.children {
		if c.name.Local == local {
			return c
		}
	}
	return nil
}

// text is the element's character data without surrounding white space.
func (n *xnode) text() string { return strings.TrimSpace(n.chars.String()) }

// value converts an element to JSON values: an element with neither child
// elements nor attributes is its text; otherwise an object keyed by local
// names, where a name repeated among the children becomes an array,
// attributes are "@name", and text beside child elements is "#text".
// xsi:nil="true" is null.
func (n *xnode) value() any {
	var attrs []xml.Attr
	for _, a := range n.attrs {
		switch {
		case a.Name.Space == "xmlns" || a.Name.Local == "xmlns" && a.Name.Space == "":
		case a.Name.Space == xsiNS && a.Name.Local == "nil":
			if a.Value == "true" || a.Value == "1" {
				return nil
			}
		case a.Name.Space == xsiNS:
		default:
			attrs = append(attrs, a)
		}
	}
	if len(n.children) == 0 && len(attrs) == 0 {
		return n.chars.String()
	}
	obj := make(map[string]any, len(n.children)+len(attrs))
	for _, a := range attrs {
		obj["@"+a.Name.Local] = a.Value
	}
	counts := make(map[string]int, len(n.children))
	for _, c := range n.children {
		counts[c.name.Local]++
	}
	for _, c := range n.children {
		k := c.name.Local
		if counts[k] > 1 {
			arr, _ := obj[k].([]any)
			obj[k] = append(arr, c.value())
		} else {
			obj[k] = c.value()
		}
	}
	if t := n.text(); t != "" && len(n.children) > 0 {
		obj["#text"] = t
	} else if t != "" {
		obj["#text"] = n.chars.String()
	}
	return obj
}
