package soap

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/tool"
)

// TestLenientReferences imports WSDLs whose references resolve only by
// local name: each is accepted with a warning per reference it took to
// mean the document's own definition.
func TestLenientReferences(t *testing.T) {
	for _, tc := range []struct {
		file     string
		ops      []string
		endpoint string
		warnings []string
	}{
		{"lenient-default-ns.wsdl", []string{"CountRows", "RunQuery"}, "https://query.example.com/soap", []string{
			`binding SoapQuery_Binding: type "SoapQuery_PortType" names {http://schemas.xmlsoap.org/wsdl/}SoapQuery_PortType, which is not defined; taken to mean portType {urn:query}SoapQuery_PortType, the only portType of that name`,
			`operation RunQuery of portType SoapQuery_PortType: input message "QueryRequest" names {http://schemas.xmlsoap.org/wsdl/}QueryRequest, which is not defined; taken to mean message {urn:query}QueryRequest, the only message of that name`,
			`operation RunQuery of portType SoapQuery_PortType: output message "QueryResponse" names {http://schemas.xmlsoap.org/wsdl/}QueryResponse, which is not defined; taken to mean message {urn:query}QueryResponse, the only message of that name`,
			`port of binding SoapQuery_Binding: binding "SoapQuery_Binding" names {http://schemas.xmlsoap.org/wsdl/}SoapQuery_Binding, which is not defined; taken to mean binding {urn:query}SoapQuery_Binding, the only binding of that name`,
		}},
		{"lenient-no-default-ns.wsdl", []string{"Ping"}, "https://gateway.example.com/ping", []string{
			`binding endpointSoap: type "endpoint" names {}endpoint, which is not defined; taken to mean portType {urn:gateway}endpoint, the only portType of that name`,
			`operation Ping of portType endpoint: input message "Ping" names {}Ping, which is not defined; taken to mean message {urn:gateway}Ping, the only message of that name`,
			`operation Ping of portType endpoint: output message "Pong" names {}Pong, which is not defined; taken to mean message {urn:gateway}Pong, the only message of that name`,
			`part parameters of message Ping: element "PingRequest" names {}PingRequest, which is not defined; taken to mean element {urn:gateway}PingRequest, the only element of that name`,
			`part parameters of message Pong: element "PingResponse" names {}PingResponse, which is not defined; taken to mean element {urn:gateway}PingResponse, the only element of that name`,
			`port of binding endpointSoap: binding "endpointSoap" names {}endpointSoap, which is not defined; taken to mean binding {urn:gateway}endpointSoap, the only binding of that name`,
		}},
		{"lenient-missing-output.wsdl", []string{"Notify", "Status"}, "https://notify.example.com/soap", []string{
			`operation Notify of portType Notifier: output message NotifyOut is not defined (looked for {urn:notify}NotifyOut, then for any message named NotifyOut): indexed with an unknown output`,
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			spec, err := (&Importer{}).Import(context.Background(), tool.Source{Data: readFile(t, tc.file)})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, op := range spec.Operations {
				ids = append(ids, op.ID)
				if op.SOAP.Endpoint != tc.endpoint {
					t.Errorf("operation %s: endpoint %q, want %q (the port found through its binding)", op.ID, op.SOAP.Endpoint, tc.endpoint)
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.ops) {
				t.Errorf("operations %v, want %v", ids, tc.ops)
			}
			for _, w := range tc.warnings {
				if !slices.Contains(spec.Warnings, w) {
					t.Errorf("no warning %q in:\n%s", w, strings.Join(spec.Warnings, "\n"))
				}
			}
			if len(spec.Warnings) != len(tc.warnings) {
				t.Errorf("%d warnings, want %d:\n%s", len(spec.Warnings), len(tc.warnings), strings.Join(spec.Warnings, "\n"))
			}
		})
	}

	t.Run("the element found by local name describes the input", func(t *testing.T) {
		spec, err := (&Importer{}).Import(context.Background(), tool.Source{Data: readFile(t, "lenient-no-default-ns.wsdl")})
		if err != nil {
			t.Fatal(err)
		}
		op := spec.Operations[0]
		if len(op.SOAP.Parts) != 1 || op.SOAP.Parts[0].Name != "message" || op.SOAP.Element != "PingRequest" || op.SOAP.Namespace != "urn:gateway" {
			t.Errorf("binding %+v, want the PingRequest wrapper with one part, message", op.SOAP)
		}
		if !strings.Contains(string(op.Input), `"message"`) {
			t.Errorf("input schema %s lacks the message field", op.Input)
		}
	})
}

func TestLenientReferencesRefused(t *testing.T) {
	const defs = `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/" xmlns:tns="urn:t" targetNamespace="urn:t">`
	for _, tc := range []struct{ name, data, detail string }{
		{"an element of two schemas", string(readFile(t, "lenient-ambiguous.wsdl")),
			`part order of message PlaceIn: element "Order" matches 2 element definitions by its local name: {urn:shop:retail}Order, {urn:shop:wholesale}Order; prefix it with the namespace meant`},
		{"a portType nowhere", defs + `<binding name="B" type="Q"><soap:binding/></binding></definitions>`,
			`binding B references portType Q, which is not defined (looked for {http://schemas.xmlsoap.org/wsdl/}Q, then for any portType named Q)`},
		{"an input message nowhere", defs + `<portType name="P"><operation name="A"><input message="tns:Gone"/></operation></portType>` +
			`<binding name="B" type="tns:P"><soap:binding style="rpc"/><operation name="A"><input><soap:body use="literal"/></input></operation></binding></definitions>`,
			`operation A of portType P: input message Gone is not defined (looked for {urn:t}Gone, then for any message named Gone)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&Importer{}).Import(context.Background(), tool.Source{Data: []byte(tc.data)})
			wantProblem(t, err, tc.detail)
		})
	}
}
