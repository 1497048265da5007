package call

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/tool"
)

// SOAP envelope namespaces.
const (
	soap11NS = "http://schemas.xmlsoap.org/soap/envelope/"
	soap12NS = "http://www.w3.org/2003/05/soap-envelope"
)

// prepareSOAP builds the POST of a SOAP operation: an envelope whose body
// element holds one child element per argument, in the order of the parts.
func prepareSOAP(t *tool.Tool, op *tool.Operation, args map[string]any) (*prepared, error) {
	b := op.SOAP
	endpoint := t.EndpointURL
	if endpoint == "" {
		endpoint = b.Endpoint
	}
	if endpoint == "" {
		endpoint = t.BaseURL
	}
	u, err := baseURL(t, endpoint)
	if err != nil {
		return nil, err
	}
	if !isXMLName(b.Element) {
		return nil, fmt.Errorf("operation %s of tool %s: SOAP element %q is not an XML name", op.ID, t.ID, b.Element)
	}
	for _, p := range b.Parts {
		if !isXMLName(p.Name) {
			return nil, fmt.Errorf("operation %s of tool %s: SOAP part %q is not an XML name", op.ID, t.ID, p.Name)
		}
	}
	var errs argErrors
	used := map[string]bool{}
	var body strings.Builder
	var places []redact.Place
	open, closing := b.Element, b.Element
	if b.Namespace != "" {
		open = "ns:" + b.Element + ` xmlns:ns="` + escapeAttr(b.Namespace) + `"`
		closing = "ns:" + b.Element
	}
	body.WriteString("<" + open + ">")
	for _, p := range b.Parts {
		used[p.Name] = true
		v, ok := present(args, p.Name)
		if !ok {
			if p.Required {
				errs.missing(p.Name, "message part")
			}
			continue
		}
		name, decl := p.Name, ""
		switch {
		case p.Namespace == "":
		case p.Namespace == b.Namespace:
			name = "ns:" + p.Name
		default:
			name, decl = "p:"+p.Name, ` xmlns:p="`+escapeAttr(p.Namespace)+`"`
		}
		writeElement(&body, &errs, &places, p.Name, name, decl, v)
	}
	body.WriteString("</" + closing + ">")
	errs.unknown(args, used, op.ID)
	if err := errs.err(); err != nil {
		return nil, err
	}

	envNS := soap11NS
	header := http.Header{}
	if b.Version == "1.2" {
		envNS = soap12NS
		ct := "application/soap+xml; charset=utf-8"
		if b.Action != "" {
			ct += `; action="` + b.Action + `"`
		}
		header.Set("Content-Type", ct)
	} else {
		header.Set("Content-Type", "text/xml; charset=utf-8")
		header.Set("SOAPAction", `"`+b.Action+`"`)
	}
	header.Set("Accept", "text/xml, application/soap+xml")
	start := xml.Header + `<soap:Envelope xmlns:soap="` + envNS + `"><soap:Body>`
	envelope := start + body.String() + `</soap:Body></soap:Envelope>`
	for i := range places {
		places[i].Start += len(start)
		places[i].End += len(start)
	}
	return &prepared{
		method:     http.MethodPost,
		url:        u,
		header:     header,
		body:       []byte(envelope),
		recordBody: jsonString(envelope),
		read:       readSOAP,
		places:     places,
	}, nil
}

// writeElement writes v as an element: an array as repeated elements, an
// object as child elements (in name order, in the parent's namespace), a
// scalar as escaped text. An object key that is not an XML name is recorded
// in errs under field, the argument's path as a JSON pointer, and not written.
// Where each scalar's text went is added to places.
func writeElement(w *strings.Builder, errs *argErrors, places *[]redact.Place, field, name, decl string, v any) {
	switch v := v.(type) {
	case nil:
	case []any:
		for i, it := range v {
			writeElement(w, errs, places, field+"/"+strconv.Itoa(i), name, decl, it)
		}
	case map[string]any:
		prefix := ""
		if i := strings.IndexByte(name, ':'); i >= 0 {
			prefix = name[:i+1]
		}
		w.WriteString("<" + name + decl + ">")
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f := field + "/" + pointerEscaper.Replace(k)
			if !isXMLName(k) {
				errs.add(f, "key %q is not an XML element name", k)
				continue
			}
			writeElement(w, errs, places, f, prefix+k, "", v[k])
		}
		w.WriteString("</" + name + ">")
	default:
		w.WriteString("<" + name + decl + ">")
		at := w.Len()
		_ = xml.EscapeText(w, []byte(scalar(v)))
		*places = append(*places, redact.Place{Arg: "/" + field, In: redact.InXML, Start: at, End: w.Len()})
		w.WriteString("</" + name + ">")
	}
}

// pointerEscaper escapes a key as a JSON pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// isXMLName reports whether s is an XML name without a colon (an NCName of
// Namespaces in XML 1.0, with the NameStartChar and NameChar of XML 1.0,
// fifth edition), so it can be written as an element's local name as is.
func isXMLName(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for i, r := range s {
		if !isNameStartChar(r) && (i == 0 || !isNameChar(r)) {
			return false
		}
	}
	return true
}

func isNameStartChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		return true
	case r < 0xC0:
		return false
	}
	return (r <= 0xD6) || (r >= 0xD8 && r <= 0xF6) || (r >= 0xF8 && r <= 0x2FF) ||
		(r >= 0x370 && r <= 0x37D) || (r >= 0x37F && r <= 0x1FFF) || (r >= 0x200C && r <= 0x200D) ||
		(r >= 0x2070 && r <= 0x218F) || (r >= 0x2C00 && r <= 0x2FEF) || (r >= 0x3001 && r <= 0xD7FF) ||
		(r >= 0xF900 && r <= 0xFDCF) || (r >= 0xFDF0 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0xEFFFF)
}

func isNameChar(r rune) bool {
	return isNameStartChar(r) || r == '-' || r == '.' || (r >= '0' && r <= '9') || r == 0xB7 ||
		(r >= 0x300 && r <= 0x36F) || (r >= 0x203F && r <= 0x2040)
}

func escapeAttr(s string) string {
	var w strings.Builder
	_ = xml.EscapeText(&w, []byte(s))
	return w.String()
}

// readSOAP reads a SOAP answer: the body element's content as JSON, or the
// Fault as JSON with its reason as the failure.
func readSOAP(_ string, data []byte) (json.RawMessage, string) {
	root, err := parseXML(data)
	if err != nil || root.name.Local != "Envelope" {
		return jsonBody(data), "the answer is not a SOAP envelope"
	}
	body := root.child("Body")
	if body == nil {
		return jsonBody(data), "the SOAP envelope has no Body"
	}
	if len(body.children) == 0 {
		return json.RawMessage("null"), ""
	}
	el := body.children[0]
	out, err := json.Marshal(el.value())
	if err != nil {
		return json.RawMessage("null"), "the SOAP answer cannot be converted to JSON"
	}
	if el.name.Local == "Fault" && (el.name.Space == soap11NS || el.name.Space == soap12NS) {
		return out, "soap fault: " + faultReason(el)
	}
	return out, ""
}

// faultReason is a Fault's faultstring (1.1) or Reason/Text (1.2), with its code.
func faultReason(f *xnode) string {
	var code, reason string
	if c := f.child("faultcode"); c != nil {
		code = c.text()
	}
	if s := f.child("faultstring"); s != nil {
		reason = s.text()
	}
	if c := f.child("Code"); c != nil {
		if v := c.child("Value"); v != nil {
			code = v.text()
		}
	}
	if r := f.child("Reason"); r != nil {
		if t := r.child("Text"); t != nil {
			reason = t.text()
		}
	}
	if reason == "" {
		reason = "no reason given"
	}
	if code != "" {
		return code + ": " + reason
	}
	return reason
}
