package soap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// sharedElementWSDL is a WSDL of 1,000 operations that all send and
// receive the element E, whose schema is given.
func sharedElementWSDL(schema string) string {
	return sharedMessageWSDL(schema, `<part name="p" element="t:E"/>`, "document")
}

// sharedMessageWSDL is a WSDL of 1,000 operations of the given style that
// all send and receive the message of the given parts.
func sharedMessageWSDL(schema, parts, style string) string {
	var ops, bops strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&ops, `<operation name="Op%d"><input message="t:M"/><output message="t:M"/></operation>`, i)
		fmt.Fprintf(&bops, `<operation name="Op%d"/>`, i)
	}
	return `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
  xmlns:x="http://www.w3.org/2001/XMLSchema" xmlns:t="urn:r" targetNamespace="urn:r">
<types><x:schema targetNamespace="urn:r">` + schema + `</x:schema></types>
<message name="M">` + parts + `</message>
<portType name="P">` + ops.String() + `</portType>
<binding name="B" type="t:P"><soap:binding style="` + style + `"/>` + bops.String() + `</binding>
</definitions>`
}

// elements is a sequence of n elements of type typ.
func elements(n int, typ string) string {
	var sb strings.Builder
	sb.WriteString("<x:sequence>")
	for i := range n {
		fmt.Fprintf(&sb, `<x:element name="e%d" type="%s"/>`, i, typ)
	}
	sb.WriteString("</x:sequence>")
	return sb.String()
}

// TestImportBudget: what operations sharing one element store is bounded
// by the document's size.
func TestImportBudget(t *testing.T) {
	t.Run("schemas", func(t *testing.T) {
		// E has 3 parts, and a schema of 3×30×30 elements (~100 KB).
		doc := sharedElementWSDL(`
  <x:complexType name="C"><x:sequence>` + elements(30, "x:string") + `</x:sequence></x:complexType>
  <x:complexType name="B">` + elements(30, "t:C") + `</x:complexType>
  <x:element name="E"><x:complexType>` + elements(3, "t:B") + `</x:complexType></x:element>`)
		spec, err := (&Importer{}).Import(context.Background(), tool.Source{Data: []byte(doc)})
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Operations) != 1000 {
			t.Fatalf("%d operations, want 1000", len(spec.Operations))
		}
		stored := 0
		for _, op := range spec.Operations {
			parts, err := json.Marshal(op.SOAP.Parts)
			if err != nil {
				t.Fatal(err)
			}
			stored += len(op.Input) + len(op.Output) + len(parts)
			if !json.Valid(op.Input) || !json.Valid(op.Output) {
				t.Fatalf("%s: invalid schema JSON", op.ID)
			}
		}
		if most := tool.BudgetFor(len(doc)); stored > most {
			t.Errorf("operations store %d bytes, want at most %d", stored, most)
		}
		last := spec.Operations[len(spec.Operations)-1]
		if !strings.Contains(string(last.Input), "not described") || len(last.SOAP.Parts) != 3 {
			t.Errorf("last operation: input of %d bytes, %d parts; want a stub input and 3 parts", len(last.Input), len(last.SOAP.Parts))
		}
		if w := strings.Join(spec.Warnings, "\n"); !strings.Contains(w, "are not described") {
			t.Errorf("warnings %q, want one saying schemas are not described", spec.Warnings)
		}
	})
	t.Run("schema nodes", func(t *testing.T) {
		// Every message is a part of type T, whose 4,999 wildcards are
		// each a schema node to convert: 10 million nodes in all.
		doc := sharedMessageWSDL(`<x:complexType name="T"><x:sequence>`+strings.Repeat(`<x:any/>`, 4999)+`</x:sequence></x:complexType>`,
			`<part name="p" type="t:T"/>`, "rpc")
		spec, err := (&Importer{}).Import(context.Background(), tool.Source{Data: []byte(doc)})
		if err != nil {
			t.Fatal(err)
		}
		last := spec.Operations[len(spec.Operations)-1]
		if !strings.Contains(string(last.Input), "not described") || len(last.SOAP.Parts) != 1 {
			t.Errorf("last operation: input %s, %d parts; want a stub input and 1 part", last.Input, len(last.SOAP.Parts))
		}
		if w := strings.Join(spec.Warnings, "\n"); !strings.Contains(w, "schema nodes") {
			t.Errorf("warnings %q, want one about schema nodes", spec.Warnings)
		}
	})
	t.Run("parts", func(t *testing.T) {
		// E's group refers to itself 30 times: thousands of parts.
		refs := strings.Repeat(`<x:group ref="t:G"/><x:element name="n" type="x:string"/>`, 30)
		doc := sharedElementWSDL(`
  <x:group name="G"><x:sequence>` + refs + `</x:sequence></x:group>
  <x:element name="E"><x:complexType><x:sequence>` + refs + `</x:sequence></x:complexType></x:element>`)
		_, err := (&Importer{}).Import(context.Background(), tool.Source{Data: []byte(doc)})
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Code != problem.SpecTooLarge {
			t.Fatalf("error %v, want %s", err, problem.SpecTooLarge)
		}
	})
}
