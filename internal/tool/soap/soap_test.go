package soap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

const stockURL = "https://example.com/ws/stock?wsdl"

func importStock(t *testing.T) *tool.Spec {
	t.Helper()
	spec, err := (&Importer{}).Import(context.Background(), tool.Source{Data: readFile(t, "stock.wsdl"), URL: stockURL})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestImportOperations(t *testing.T) {
	spec := importStock(t)
	type row struct{ ID, Kind, Version, Style, Action, Endpoint string }
	want := []row{
		{"GetQuote", tool.Read, "1.1", "document", "urn:GetQuote", "https://stock.example.com/soap11"},
		{"PlaceOrder", tool.Write, "1.1", "document", "urn:PlaceOrder", "https://stock.example.com/soap11"},
		{"StockPortType_Ping", tool.Write, "1.1", "document", "urn:Ping", "https://stock.example.com/soap11"},
		{"Convert", tool.Write, "1.1", "rpc", "urn:convert#Convert", "https://example.com/convert"},
		{"IsMarketOpen", tool.Read, "1.1", "rpc", "urn:convert#IsMarketOpen", "https://example.com/convert"},
		{"ConvertPortType_Ping", tool.Write, "1.1", "rpc", "urn:convert#Ping", "https://example.com/convert"},
	}
	var got []row
	for _, op := range spec.Operations {
		s := op.SOAP
		got = append(got, row{op.ID, op.Kind, s.Version, s.Style, s.Action, s.Endpoint})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
	if spec.BaseURL != "https://stock.example.com/soap11" {
		t.Errorf("BaseURL = %q", spec.BaseURL)
	}
	if len(spec.Warnings) != 0 {
		t.Errorf("warnings: %q", spec.Warnings)
	}
}

func TestImportOperationDetail(t *testing.T) {
	ops := map[string]tool.Operation{}
	for _, op := range importStock(t).Operations {
		ops[op.ID] = op
	}
	const stockNS = "http://example.com/stock"
	tests := []struct {
		id            string
		summary       string
		binding       *tool.SOAPBinding
		input, output string
	}{
		{
			id:      "GetQuote",
			summary: "Returns the latest quote.",
			binding: &tool.SOAPBinding{
				Version: "1.1", Action: "urn:GetQuote", Style: "document", Endpoint: "https://stock.example.com/soap11",
				Namespace: stockNS, Element: "GetQuoteRequest", ResponseElement: "GetQuoteResponse",
				Parts: []tool.Part{
					{Name: "symbol", Namespace: stockNS, Type: "string", Required: true},
					{Name: "currency", Namespace: stockNS, Type: "Currency"},
					{Name: "limit", Namespace: stockNS, Type: "int", Required: true},
				},
			},
			input: `{"properties":{"currency":{"enum":["USD","EUR"],"type":"string"},"limit":{"type":"integer"},"symbol":{"type":"string"}},"required":["symbol","limit"],"type":"object"}`,
			output: `{"properties":{"quote":{"items":{"properties":{"asOf":{"format":"date-time","type":"string"},"price":{"type":"number"},` +
				`"symbol":{"type":"string"},"tags":{"items":{"type":"string"},"type":"array"}},"required":["symbol","price","asOf"],"type":"object"},"type":"array"}},"required":["quote"],"type":"object"}`,
		},
		{
			id: "PlaceOrder",
			binding: &tool.SOAPBinding{
				Version: "1.1", Action: "urn:PlaceOrder", Style: "document", Endpoint: "https://stock.example.com/soap11",
				Namespace: stockNS, Element: "PlaceOrder", ResponseElement: "PlaceOrderResponse",
				Parts: []tool.Part{
					{Name: "account", Namespace: stockNS, Type: "string", Required: true},
					{Name: "quantity", Namespace: stockNS, Type: "long", Required: true},
					{Name: "limitPrice", Namespace: stockNS, Type: "double", Required: true},
					{Name: "urgent", Namespace: stockNS, Type: "boolean"},
				},
			},
			input:  `{"properties":{"account":{"type":"string"},"limitPrice":{"type":"number"},"quantity":{"type":"integer"},"urgent":{"type":"boolean"}},"required":["account","quantity","limitPrice"],"type":"object"}`,
			output: `{"properties":{"orderId":{"type":"string"}},"required":["orderId"],"type":"object"}`,
		},
		{
			id: "StockPortType_Ping",
			binding: &tool.SOAPBinding{
				Version: "1.1", Action: "urn:Ping", Style: "document", Endpoint: "https://stock.example.com/soap11",
				Namespace: stockNS, Element: "Ping", ResponseElement: "Pong",
			},
			input:  `{"properties":{},"type":"object"}`,
			output: `{"properties":{"Pong":{"type":"string"}},"required":["Pong"],"type":"object"}`,
		},
		{
			id: "Convert",
			binding: &tool.SOAPBinding{
				Version: "1.1", Action: "urn:convert#Convert", Style: "rpc", Endpoint: "https://example.com/convert",
				Namespace: "urn:convert", Element: "Convert", ResponseElement: "ConvertResponse",
				Parts: []tool.Part{
					{Name: "amount", Type: "double", Required: true},
					{Name: "from", Type: "Currency", Required: true},
					{Name: "to", Type: "Currency", Required: true},
				},
			},
			input:  `{"properties":{"amount":{"type":"number"},"from":{"enum":["USD","EUR"],"type":"string"},"to":{"enum":["USD","EUR"],"type":"string"}},"required":["amount","from","to"],"type":"object"}`,
			output: `{"properties":{"result":{"type":"number"}},"required":["result"],"type":"object"}`,
		},
		{
			id: "IsMarketOpen",
			binding: &tool.SOAPBinding{
				Version: "1.1", Action: "urn:convert#IsMarketOpen", Style: "rpc", Endpoint: "https://example.com/convert",
				Namespace: "urn:convert", Element: "IsMarketOpen", ResponseElement: "IsMarketOpenResponse",
			},
			input:  `{"properties":{},"type":"object"}`,
			output: `{"properties":{"open":{"type":"boolean"}},"required":["open"],"type":"object"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			op, ok := ops[tc.id]
			if !ok {
				t.Fatalf("no operation %s", tc.id)
			}
			if op.Summary != tc.summary {
				t.Errorf("summary = %q, want %q", op.Summary, tc.summary)
			}
			if diff := cmp.Diff(tc.binding, op.SOAP); diff != "" {
				t.Errorf("binding (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.input, string(op.Input)); diff != "" {
				t.Errorf("input schema (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.output, string(op.Output)); diff != "" {
				t.Errorf("output schema (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImportFetchesImports serves a WSDL whose messages and types are in
// documents it imports by relative location.
func TestImportFetchesImports(t *testing.T) {
	var fetched []string
	srv := httptest.NewServer(http.FileServer(http.Dir("testdata")))
	defer srv.Close()
	fetch := func(ctx context.Context, url string) ([]byte, error) {
		fetched = append(fetched, strings.TrimPrefix(url, srv.URL))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("status %d", resp.StatusCode)
		}
		return io.ReadAll(resp.Body)
	}
	src := tool.Source{Data: readFile(t, "split.wsdl"), URL: srv.URL + "/split.wsdl"}
	spec, err := (&Importer{Fetch: fetch}).Import(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/messages.wsdl", "/types/echo.xsd"}, fetched); diff != "" {
		t.Errorf("fetched (-want +got):\n%s", diff)
	}
	if len(spec.Operations) != 1 {
		t.Fatalf("got %d operations, want 1", len(spec.Operations))
	}
	want := &tool.SOAPBinding{
		Version: "1.2", Action: "urn:Echo", Style: "document", Endpoint: srv.URL + "/echo",
		Namespace: "urn:split:types", Element: "Echo", ResponseElement: "EchoResult",
		Parts: []tool.Part{{Name: "text", Type: "string", Required: true}, {Name: "times", Type: "unsignedShort"}},
	}
	if diff := cmp.Diff(want, spec.Operations[0].SOAP); diff != "" {
		t.Errorf("binding (-want +got):\n%s", diff)
	}
	if spec.BaseURL != srv.URL+"/echo" {
		t.Errorf("BaseURL = %q", spec.BaseURL)
	}
	if len(spec.Warnings) != 0 {
		t.Errorf("warnings: %q", spec.Warnings)
	}

	t.Run("without Fetch", func(t *testing.T) {
		_, err := (&Importer{}).Import(context.Background(), src)
		wantProblem(t, err, "input message EchoIn is not defined (looked for {urn:split:messages}EchoIn, then for any message named EchoIn) (imports not read: "+srv.URL+"/messages.wsdl")
	})
}

func wantProblem(t *testing.T, err error, detail string) {
	t.Helper()
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.SpecInvalid {
		t.Fatalf("err = %v, want a %s problem", err, problem.SpecInvalid)
	}
	if !strings.Contains(pe.Detail, detail) {
		t.Errorf("detail %q does not contain %q", pe.Detail, detail)
	}
}

func TestImportInvalid(t *testing.T) {
	const defs = `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/" xmlns:tns="urn:t" targetNamespace="urn:t">`
	tests := []struct {
		name   string
		data   string
		detail string
	}{
		{"JSON", `{"openapi": "3.1.0"}`, "not XML: no root element"},
		{"bad markup", "<definitions>\n<a b=>", "not XML: line 2"},
		{"unclosed", "<definitions xmlns=\"http://schemas.xmlsoap.org/wsdl/\">\n<types>", "not XML: line 2"},
		{"empty", "", "no root element"},
		{"WSDL 2.0", string(readFile(t, "wsdl20.wsdl")), "WSDL 2.0 is not supported"},
		{"other root", `<html><body/></html>`, "root element {}html is not a WSDL 1.1 definitions element"},
		{"unknown message", string(readFile(t, "unknown-message.wsdl")), "operation Lost of portType P: input message Nowhere is not defined"},
		{"no SOAP binding", defs + `<portType name="P"><operation name="A"/></portType></definitions>`, "no SOAP 1.1 or SOAP 1.2 binding"},
		{"unknown portType", defs + `<binding name="B" type="tns:Q"><soap:binding/></binding></definitions>`, "binding B references portType Q, which is not defined"},
		{"too deep", strings.Repeat("<a>", maxXMLDepth+1) + strings.Repeat("</a>", maxXMLDepth+1), "nests too deeply"},
		{"two roots", `<a/><b/>`, "more than one root element"},
		{"unsupported encoding", `<?xml version="1.0" encoding="EBCDIC"?><a/>`, "EBCDIC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&Importer{}).Import(context.Background(), tool.Source{Data: []byte(tc.data)})
			wantProblem(t, err, tc.detail)
		})
	}
}

func TestImportLatin1(t *testing.T) {
	doc := strings.Replace(string(readFile(t, "stock.wsdl")), `encoding="UTF-8"`, `encoding="ISO-8859-1"`, 1)
	doc = strings.Replace(doc, "Returns the latest quote.", "Returns the latest quote \xe0 la minute.", 1)
	spec, err := (&Importer{}).Import(context.Background(), tool.Source{Data: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := spec.Operations[0].Summary, "Returns the latest quote à la minute."; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}

func TestIsRead(t *testing.T) {
	tests := map[string]bool{
		"GetQuote": true, "get_quote": true, "getQuote": true, "LIST": true, "ListOrders": true,
		"FindUser": true, "SearchItems": true, "QueryBalance": true, "ReadFile": true, "CheckStatus": true,
		"FetchReport": true, "LookupAddress": true, "DescribeAccount": true, "IsMarketOpen": true, "HasAccess": true,
		"GET_QUOTE": true, "LIST2": true, "Get_Quote": true, "Get2": true,
		"IssueRefund": false, "Hashes": false, "Getaway": false, "CreateOrder": false, "Ping": false, "": false,
		"CHECKOUT": false, "ISSUEREFUND": false, "HASHPASSWORD": false, "LISTENERADD": false, "GETANDDELETE": false,
		"Is.Delete": false, "get.delete": false, "GETQuote": false, "gETQuote": false,
	}
	for name, want := range tests {
		if got := isRead(name); got != want {
			t.Errorf("isRead(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestImportBoundedSchemas imports types that refer to themselves many
// times over: the schemas stay small and the import quick.
func TestImportBoundedSchemas(t *testing.T) {
	refs := strings.Repeat(`<x:group ref="t:G"/><x:element name="n" type="t:Node"/>`, 30)
	doc := `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
  xmlns:x="http://www.w3.org/2001/XMLSchema" xmlns:t="urn:r" targetNamespace="urn:r">
<types><x:schema targetNamespace="urn:r">
  <x:group name="G"><x:sequence>` + refs + `</x:sequence></x:group>
  <x:complexType name="Node"><x:sequence>` + refs + `</x:sequence></x:complexType>
  <x:element name="E" type="t:Node"/>
</x:schema></types>
<message name="M"><part name="p" element="t:E"/></message>
<portType name="P"><operation name="A"><input message="t:M"/><output message="t:M"/></operation></portType>
<binding name="B" type="t:P"><soap:binding style="document"/><operation name="A"/></binding>
</definitions>`
	spec, err := (&Importer{}).Import(context.Background(), tool.Source{Data: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	op := spec.Operations[0]
	if len(op.Input) > 1<<20 || len(op.Output) > 1<<20 {
		t.Errorf("schemas of %d and %d bytes", len(op.Input), len(op.Output))
	}
}
