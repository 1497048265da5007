package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// refreshTo refreshes a tool and answers its diff as "operation kind path
// breaking" lines and "- operation" for each one removed.
func (h *harness) refreshTo(tok, id string) []string {
	h.t.Helper()
	got, r := h.refresh(tok, id)
	if r.Status != http.StatusOK {
		h.t.Fatalf("refresh: %d %s", r.Status, r.Body)
	}
	var out []string
	for _, op := range got.Diff.Removed {
		out = append(out, "- "+op)
	}
	return append(out, got.kinds()...)
}

// stockWSDL is a document/literal SOAP service; B drops an element of
// GetQuote's request, makes another required, changes a third's type,
// drops a field of its response and drops the Cancel operation.
func stockWSDL(b bool) string {
	req := `<s:element name="symbol" type="s:string"/>
            <s:element name="currency" type="s:string" minOccurs="0"/>
            <s:element name="limit" type="s:int"/>
            <s:element name="market" type="s:string" minOccurs="0"/>`
	resp := `<s:element name="symbol" type="s:string"/><s:element name="price" type="s:decimal"/>`
	cancel := `<operation name="Cancel"><input message="tns:CancelIn"/><output message="tns:CancelOut"/></operation>`
	cancelBinding := `<operation name="Cancel"><soap:operation soapAction="urn:Cancel"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation>`
	if b {
		req = `<s:element name="symbol" type="s:string"/>
            <s:element name="currency" type="s:string"/>
            <s:element name="limit" type="s:string"/>`
		resp = `<s:element name="symbol" type="s:string"/>`
		cancel, cancelBinding = "", ""
	}
	return `<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
    xmlns:s="http://www.w3.org/2001/XMLSchema" xmlns:tns="http://example.com/stock" targetNamespace="http://example.com/stock">
  <types>
    <s:schema targetNamespace="http://example.com/stock" elementFormDefault="qualified">
      <s:element name="GetQuoteRequest"><s:complexType><s:sequence>` + req + `</s:sequence></s:complexType></s:element>
      <s:element name="GetQuoteResponse"><s:complexType><s:sequence>` + resp + `</s:sequence></s:complexType></s:element>
      <s:element name="CancelRequest"><s:complexType><s:sequence><s:element name="id" type="s:string"/></s:sequence></s:complexType></s:element>
      <s:element name="CancelResponse"><s:complexType><s:sequence><s:element name="ok" type="s:boolean"/></s:sequence></s:complexType></s:element>
    </s:schema>
  </types>
  <message name="GetQuoteIn"><part name="parameters" element="tns:GetQuoteRequest"/></message>
  <message name="GetQuoteOut"><part name="parameters" element="tns:GetQuoteResponse"/></message>
  <message name="CancelIn"><part name="parameters" element="tns:CancelRequest"/></message>
  <message name="CancelOut"><part name="parameters" element="tns:CancelResponse"/></message>
  <portType name="StockPortType">
    <operation name="GetQuote"><input message="tns:GetQuoteIn"/><output message="tns:GetQuoteOut"/></operation>
    ` + cancel + `
  </portType>
  <binding name="StockSoap" type="tns:StockPortType">
    <soap:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>
    <operation name="GetQuote"><soap:operation soapAction="urn:GetQuote"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation>
    ` + cancelBinding + `
  </binding>
  <service name="StockService">
    <port name="StockSoapPort" binding="tns:StockSoap"><soap:address location="https://stock.example.com/soap"/></port>
  </service>
</definitions>`
}

// TestToolRefreshSOAP: a WSDL served as A, then B: each SOAP break named.
func TestToolRefreshSOAP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	spec := newVersionedSpec(t, stockWSDL(false))
	tl := h.mustRegister(tok, map[string]any{"name": "stock", "type": "soap", "spec_url": spec.URL})
	spec.set(stockWSDL(true))
	want := []string{
		"- Cancel",
		"GetQuote required_added currency breaking",
		"GetQuote type_changed limit breaking",
		"GetQuote parameter_removed market breaking",
		"GetQuote response_field_removed response.price breaking",
	}
	if diff := cmp.Diff(want, h.refreshTo(tok, tl.ID)); diff != "" {
		t.Errorf("SOAP diff (-want +got):\n%s", diff)
	}
}

// notesMCP serves one of two MCP servers written with the SDK, as version
// says: B drops a tool, narrows add_note's input (an optional property
// renamed to a required one, one of another type, an enum narrowed) and
// drops a field of its output.
func notesMCP(t *testing.T, version *atomic.Int32) string {
	t.Helper()
	server := func(b bool) *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
		in := `{"type":"object","required":["text"],"properties":{"text":{"type":"string"},"tag":{"type":"string"},
			"priority":{"type":"integer"},"color":{"type":"string","enum":["red","green","blue"]}}}`
		out := `{"type":"object","properties":{"id":{"type":"string"},"created":{"type":"string"}}}`
		if b {
			in = `{"type":"object","required":["text","folder"],"properties":{"text":{"type":"string"},"folder":{"type":"string"},
				"priority":{"type":"string"},"color":{"type":"string","enum":["red","green"]}}}`
			out = `{"type":"object","properties":{"id":{"type":"string"}}}`
		}
		answer := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"id": "n1"}}, nil
		}
		srv.AddTool(&mcp.Tool{Name: "add_note", InputSchema: json.RawMessage(in), OutputSchema: json.RawMessage(out)}, answer)
		if !b {
			srv.AddTool(&mcp.Tool{Name: "purge_notes", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer)
		}
		return srv
	}
	a, b := server(false), server(true)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		if version.Load() == 2 {
			return b
		}
		return a
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestToolRefreshMCP: a real MCP server answers tools/list as A, then B.
func TestToolRefreshMCP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	var version atomic.Int32
	version.Store(1)
	tl := h.mustRegister(tok, map[string]any{"name": "notes", "type": "mcp", "spec_url": notesMCP(t, &version)})
	version.Store(2)
	want := []string{
		"- purge_notes",
		"add_note enum_narrowed color breaking",
		"add_note required_added folder breaking",
		"add_note type_changed priority breaking",
		"add_note response_field_removed response.created breaking",
		"add_note parameter_renamed tag breaking",
	}
	if diff := cmp.Diff(want, h.refreshTo(tok, tl.ID)); diff != "" {
		t.Errorf("MCP diff (-want +got):\n%s", diff)
	}
}

// TestToolRefreshA2A: an agent card served as A, then B, which drops a
// skill, narrows one's input modes and another's output modes (from the
// card's defaults).
func TestToolRefreshA2A(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tok := h.token("acme", "tools:write tools:read")
	card := func(b bool) string {
		skills := `{"id":"triage","name":"Triage","description":"d","tags":[],"inputModes":["text/plain","application/json"]},
			{"id":"summarize","name":"Summarize","description":"d","tags":[]},
			{"id":"translate","name":"Translate","description":"d","tags":[]}`
		outModes := `["text/plain","application/json"]`
		if b {
			skills = `{"id":"triage","name":"Triage","description":"d","tags":[],"inputModes":["text/plain"]},
			{"id":"summarize","name":"Summarize","description":"d","tags":[]}`
			outModes = `["text/plain"]`
		}
		return fmt.Sprintf(`{"name":"helper","description":"d","version":"1",
			"supportedInterfaces":[{"url":"https://helper.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
			"capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":%s,"skills":[%s]}`, outModes, skills)
	}
	spec := newVersionedSpec(t, card(false))
	tl := h.mustRegister(tok, map[string]any{"name": "helper", "type": "a2a", "spec_url": spec.URL})
	spec.set(card(true))
	want := []string{
		"- translate",
		"summarize mode_removed output_modes breaking",
		"triage mode_removed input_modes breaking",
		"triage mode_removed output_modes breaking",
	}
	got := h.refreshTo(tok, tl.ID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("A2A diff (-want +got):\n%s", diff)
	}
	if !strings.Contains(strings.Join(got, "\n"), "triage") {
		t.Errorf("no change of triage: %v", got)
	}
}
