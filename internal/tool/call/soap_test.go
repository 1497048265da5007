package call

import (
	"context"
	"encoding/xml"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

const stockNS = "http://example.com/stock"

// soapRequest is what the test server reads of an envelope.
type soapRequest struct {
	XMLName xml.Name
	Body    struct {
		Op struct {
			XMLName xml.Name
			Symbol  struct {
				XMLName xml.Name
				Value   string `xml:",chardata"`
			} `xml:"Symbol"`
			Exchange []struct {
				XMLName xml.Name
				Value   string `xml:",chardata"`
			} `xml:"Exchange"`
		} `xml:",any"`
	} `xml:"Body"`
}

func soapServer(t *testing.T) *recorder {
	t.Helper()
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) {
		var env soapRequest
		if err := xml.Unmarshal(body, &env); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		envNS := env.XMLName.Space
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		if env.Body.Op.Symbol.Value == "FAIL" {
			w.WriteHeader(http.StatusInternalServerError)
			if envNS == soap12NS {
				_, _ = w.Write([]byte(`<?xml version="1.0"?><env:Envelope xmlns:env="` + soap12NS + `"><env:Body><env:Fault>` +
					`<env:Code><env:Value>env:Sender</env:Value></env:Code><env:Reason><env:Text xml:lang="en">Unknown symbol FAIL</env:Text></env:Reason>` +
					`</env:Fault></env:Body></env:Envelope>`))
				return
			}
			_, _ = w.Write([]byte(`<?xml version="1.0"?><soap:Envelope xmlns:soap="` + soap11NS + `"><soap:Body><soap:Fault>` +
				`<faultcode>soap:Client</faultcode><faultstring>Unknown symbol FAIL</faultstring></soap:Fault></soap:Body></soap:Envelope>`))
			return
		}
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="utf-8"?>
<s:Envelope xmlns:s="` + envNS + `" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <s:Body>
    <m:GetPriceResponse xmlns:m="` + stockNS + `">
      <m:Symbol>` + escapeAttr(env.Body.Op.Symbol.Value) + `</m:Symbol>
      <m:Price currency="USD">34.5</m:Price>
      <m:Exchange>NYSE</m:Exchange>
      <m:Exchange>LSE</m:Exchange>
      <m:Note xsi:nil="true"/>
    </m:GetPriceResponse>
  </s:Body>
</s:Envelope>`))
	})
}

func TestCallSOAP(t *testing.T) {
	api := soapServer(t)
	getPrice := func(version string) *tool.Operation {
		return &tool.Operation{ID: "GetPrice", Kind: tool.Read, SOAP: &tool.SOAPBinding{
			Version: version, Action: "http://example.com/GetPrice", Style: "document",
			Endpoint: api.URL + "/stock", Namespace: stockNS, Element: "GetPrice",
			Parts: []tool.Part{
				{Name: "Symbol", Namespace: stockNS, Type: "string", Required: true},
				{Name: "Exchange", Type: "string"},
			},
		}}
	}
	stock := &tool.Tool{ID: "tool_stock", Name: "stock", Type: tool.SOAP, BaseURL: "http://127.0.0.1:9/unused"}
	okBody := `{"Exchange":["NYSE","LSE"],"Note":null,"Price":{"#text":"34.5","@currency":"USD"},"Symbol":"A&B <C>"}`
	tests := []struct {
		name            string
		version         string
		symbol          string
		wantContentType string
		wantAction      string
		want            outcome
		wantBody        string
	}{
		{"SOAP 1.1", "1.1", "A&B <C>", "text/xml; charset=utf-8", `"http://example.com/GetPrice"`, outcome{}, okBody},
		{"SOAP 1.2", "1.2", "A&B <C>", `application/soap+xml; charset=utf-8; action="http://example.com/GetPrice"`, "", outcome{}, okBody},
		{"SOAP 1.1 fault", "1.1", "FAIL", "text/xml; charset=utf-8", `"http://example.com/GetPrice"`,
			outcome{Status: 500, Msg: "the API answered 500 Internal Server Error: soap fault: soap:Client: Unknown symbol FAIL"},
			`{"faultcode":"soap:Client","faultstring":"Unknown symbol FAIL"}`},
		{"SOAP 1.2 fault", "1.2", "FAIL", `application/soap+xml; charset=utf-8; action="http://example.com/GetPrice"`, "",
			outcome{Status: 500, Msg: "the API answered 500 Internal Server Error: soap fault: env:Sender: Unknown symbol FAIL"},
			`{"Code":{"Value":"env:Sender"},"Reason":{"Text":{"#text":"Unknown symbol FAIL","@lang":"en"}}}`},
	}
	ex := newExecutor(t, Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(api.requests())
			res, err := ex.Call(context.Background(), tool.CallRequest{
				Tool: stock, Operation: getPrice(tc.version),
				Args: map[string]any{"Symbol": tc.symbol, "Exchange": []any{"NYSE", "LSE"}},
			})
			if diff := cmp.Diff(tc.want, outcomeOf(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(jsonValue(t, []byte(tc.wantBody)), jsonValue(t, res.Body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			reqs := api.requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("server got %d requests", len(reqs))
			}
			r := reqs[0]
			got := []string{r.Method, r.Path, r.Header.Get("Content-Type"), r.Header.Get("SOAPAction")}
			if diff := cmp.Diff([]string{"POST", "/stock", tc.wantContentType, tc.wantAction}, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			var env soapRequest
			if err := xml.Unmarshal([]byte(r.Body), &env); err != nil {
				t.Fatalf("envelope: %v\n%s", err, r.Body)
			}
			gotEnv := []string{env.XMLName.Space, env.Body.Op.XMLName.Space, env.Body.Op.XMLName.Local,
				env.Body.Op.Symbol.XMLName.Space, env.Body.Op.Symbol.Value}
			for _, e := range env.Body.Op.Exchange {
				gotEnv = append(gotEnv, e.XMLName.Space+"|"+e.Value)
			}
			wantNS := soap11NS
			if tc.version == "1.2" {
				wantNS = soap12NS
			}
			if diff := cmp.Diff([]string{wantNS, stockNS, "GetPrice", stockNS, tc.symbol, "|NYSE", "|LSE"}, gotEnv); diff != "" {
				t.Errorf("envelope (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("missing part", func(t *testing.T) {
		_, err := ex.Call(context.Background(), tool.CallRequest{Tool: stock, Operation: getPrice("1.1"), Args: map[string]any{"Ticker": "X"}})
		want := outcome{Code: problem.ValidationFailed, Msg: "2 fields are invalid", Fields: []problem.FieldError{
			{Field: "Symbol", Message: "is required (message part)"},
			{Field: "Ticker", Message: "is not an argument of operation GetPrice"},
		}}
		if diff := cmp.Diff(want, outcomeOf(err)); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})
}

func TestXMLToJSON(t *testing.T) {
	tests := []struct {
		name string
		xml  string
		want any
	}{
		{"text", `<a>hi</a>`, "hi"},
		{"empty", `<a/>`, ""},
		{"children", `<a><b>1</b><c>2</c></a>`, map[string]any{"b": "1", "c": "2"}},
		{"repeated", `<a><b>1</b><b>2</b><c/></a>`, map[string]any{"b": []any{"1", "2"}, "c": ""}},
		{"attributes", `<a id="7" xmlns:x="urn:x"><x:b>t</x:b></a>`, map[string]any{"@id": "7", "b": "t"}},
		{"nil", `<a xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><b xsi:nil="true"/></a>`, map[string]any{"b": nil}},
		{"nested", `<a><b><c>x</c><c>y</c></b></a>`, map[string]any{"b": map[string]any{"c": []any{"x", "y"}}}},
		{"escaped", `<a>&lt;&amp;&gt;</a>`, "<&>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := parseXML([]byte(tc.xml))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, n.value()); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCallSOAPElementNames checks that argument object keys become element
// names only when they are XML names: anything else fails the call before a
// request is sent, so a key cannot close its element and open another.
func TestCallSOAPElementNames(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte, _ int) {
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		_, _ = w.Write([]byte(`<s:Envelope xmlns:s="` + soap11NS + `"><s:Body><PayResponse>ok</PayResponse></s:Body></s:Envelope>`))
	})
	pay := &tool.Operation{ID: "Pay", Kind: tool.Write, SOAP: &tool.SOAPBinding{
		Version: "1.1", Style: "document", Endpoint: api.URL + "/pay", Namespace: stockNS, Element: "Pay",
		Parts: []tool.Part{
			{Name: "amount", Namespace: stockNS, Type: "decimal", Required: true},
			{Name: "memo", Namespace: stockNS},
			{Name: "lines"},
		},
	}}
	payTool := &tool.Tool{ID: "tool_pay", Name: "pay", Type: tool.SOAP}
	ex := newExecutor(t, Options{})

	bad := func(field, key string) outcome {
		return outcome{Code: problem.ValidationFailed, Msg: field + `: key "` + key + `" is not an XML element name`,
			Fields: []problem.FieldError{{Field: field, Message: `key "` + key + `" is not an XML element name`}}}
	}
	tests := []struct {
		name string
		args map[string]any
		want outcome
	}{
		{"closes its element", map[string]any{"amount": 5.0, "memo": map[string]any{"x></memo><amount>1000000</amount><memo": "hi"}},
			bad("memo/x><~1memo><amount>1000000<~1amount><memo", "x></memo><amount>1000000</amount><memo")},
		{"nested deeper", map[string]any{"amount": 5.0, "memo": map[string]any{"a": map[string]any{"b c": "hi"}}},
			bad("memo/a/b c", "b c")},
		{"in an array item", map[string]any{"amount": 5.0, "lines": []any{map[string]any{"sku": "1"}, map[string]any{"sku>": "2"}}},
			bad("lines/1/sku>", "sku>")},
		{"slash in the key", map[string]any{"amount": 5.0, "memo": map[string]any{"a/b~": "x"}}, bad("memo/a~1b~0", "a/b~")},
		{"prefix", map[string]any{"amount": 5.0, "memo": map[string]any{"soap:Body": "x"}}, bad("memo/soap:Body", "soap:Body")},
		{"empty", map[string]any{"amount": 5.0, "memo": map[string]any{"": "x"}}, bad("memo/", "")},
		{"leading digit", map[string]any{"amount": 5.0, "memo": map[string]any{"1a": "x"}}, bad("memo/1a", "1a")},
		{"leading dash", map[string]any{"amount": 5.0, "memo": map[string]any{"-a": "x"}}, bad("memo/-a", "-a")},
		{"quote", map[string]any{"amount": 5.0, "memo": map[string]any{`a x="1"`: "x"}}, bad(`memo/a x="1"`, `a x=\"1\"`)},
		{"invalid UTF-8", map[string]any{"amount": 5.0, "memo": map[string]any{"a\xff": "x"}}, bad("memo/a\xff", `a\xff`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(api.requests())
			_, err := ex.Call(context.Background(), tool.CallRequest{Tool: payTool, Operation: pay, Args: tc.args})
			if diff := cmp.Diff(tc.want, outcomeOf(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if n := len(api.requests()) - before; n != 0 {
				t.Errorf("server got %d requests, want none", n)
			}
		})
	}

	t.Run("XML names are written", func(t *testing.T) {
		before := len(api.requests())
		args := map[string]any{"amount": 5.0, "memo": map[string]any{"Note": "a</Note>&", "prénom": "é", "a.b-c_1·": map[string]any{"x": 1.0}}}
		if _, err := ex.Call(context.Background(), tool.CallRequest{Tool: payTool, Operation: pay, Args: args}); err != nil {
			t.Fatal(err)
		}
		reqs := api.requests()[before:]
		if len(reqs) != 1 {
			t.Fatalf("server got %d requests", len(reqs))
		}
		n, err := parseXML([]byte(reqs[0].Body))
		if err != nil {
			t.Fatalf("envelope: %v\n%s", err, reqs[0].Body)
		}
		want := map[string]any{"Body": map[string]any{"Pay": map[string]any{
			"amount": "5",
			"memo":   map[string]any{"Note": "a</Note>&", "prénom": "é", "a.b-c_1·": map[string]any{"x": "1"}},
		}}}
		if diff := cmp.Diff(want, n.value()); diff != "" {
			t.Errorf("envelope (-want +got):\n%s", diff)
		}
	})

	t.Run("binding names", func(t *testing.T) {
		for _, b := range []*tool.SOAPBinding{
			{Version: "1.1", Endpoint: api.URL, Element: "Pay><x", Parts: []tool.Part{{Name: "amount"}}},
			{Version: "1.1", Endpoint: api.URL, Element: "Pay", Parts: []tool.Part{{Name: "amount></Pay><x"}}},
		} {
			before := len(api.requests())
			_, err := ex.Call(context.Background(), tool.CallRequest{Tool: payTool, Operation: &tool.Operation{ID: "Pay", SOAP: b}, Args: map[string]any{"amount": 1.0}})
			if err == nil || !strings.Contains(err.Error(), "is not an XML name") {
				t.Errorf("element %q part %q: error %v, want one about the name", b.Element, b.Parts[0].Name, err)
			}
			if n := len(api.requests()) - before; n != 0 {
				t.Errorf("server got %d requests, want none", n)
			}
		}
	})
}
