// Package demo is agentplane's demonstration: three small business APIs
// (payments over OpenAPI, customers over GraphQL, case management over
// SOAP) served on loopback, and the seeding that registers them as tools,
// deploys a fraud-triage agent in two versions and makes some history, all
// through the server's own HTTP API.
package demo

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// APIs are the three example services, each on its own loopback port.
type APIs struct {
	Payments  string // base URL; the OpenAPI document is at /openapi.json
	Customers string // base URL; the SDL is at /schema.graphql, the endpoint /graphql
	Cases     string // base URL; the WSDL is at /cases.wsdl, the endpoint /soap
	// Model is the demo model's OpenAI API root (Chat Completions at
	// /chat/completions, Responses at /responses): rules, not an LLM.
	Model string
	// Agent is the base URL of the demo's external agent, a Go program
	// (examples/external/go-agent) answering each version at /<version>.
	Agent   string
	servers []*http.Server
	// Delay is how long the customer API takes to answer, so a streamed
	// invoke shows its steps arrive one by one.
	Delay time.Duration
}

// Start serves the three APIs and the demo model on 127.0.0.1 until Close:
// on ports base+1 to base+4 when base is set and they are free, so that a
// demo started again on the same data finds its APIs where its workflows
// (a refund waiting for approval among them) left them; elsewhere on any
// free port.
func Start(delay time.Duration, base int) (*APIs, error) {
	a := &APIs{Delay: delay}
	cases := &caseBook{}
	for i, s := range []struct {
		url *string
		h   http.Handler
	}{{&a.Payments, paymentsHandler()}, {&a.Customers, a.customersHandler()}, {&a.Cases, cases.handler()}, {&a.Model, modelHandler()}} {
		ln, err := listenNear(base, i+1)
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("demo API: %w", err)
		}
		hs := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second}
		a.servers = append(a.servers, hs)
		*s.url = "http://" + ln.Addr().String()
		go hs.Serve(ln) //nolint:errcheck // ends with Close
	}
	a.Model += "/v1"
	return a, nil
}

// listenNear listens on 127.0.0.1 at base+offset when base is set and that
// port is free, else on any free port.
func listenNear(base, offset int) (net.Listener, error) {
	if base > 0 && base+offset <= 65535 {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+offset)); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// StartAgent serves the demo's external agent, asking model: version 1
// and 2 at /1 and /2, their instructions differing as
// payments-assistant's do. It listens at base+5 as Start's APIs do, so
// the versions' URLs still answer when the demo starts again.
func (a *APIs) StartAgent(base int, model string) error {
	ln, err := listenNear(base, 5)
	if err != nil {
		return fmt.Errorf("demo agent: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /1", goagent.NewHandler(goagent.Options{Model: model, MaxTurns: 6, Instructions: assistantInstructions}))
	mux.Handle("POST /2", goagent.NewHandler(goagent.Options{Model: model, MaxTurns: 6, Instructions: assistantInstructions + " " + CaseInstruction}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.servers = append(a.servers, hs)
	a.Agent = "http://" + ln.Addr().String()
	go hs.Serve(ln) //nolint:errcheck // ends with Close
	return nil
}

// AnthropicModel is the demo model's Anthropic API root (Messages at
// /v1/messages, as Anthropic's base URL has it).
func (a *APIs) AnthropicModel() string { return strings.TrimSuffix(a.Model, "/v1") }

// Close stops the APIs.
func (a *APIs) Close() {
	for _, s := range a.servers {
		s.Close()
	}
}

// transaction is a card transaction of the payments API.
type transaction struct {
	ID       string  `json:"id"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Customer string  `json:"customer_id"`
	Merchant string  `json:"merchant"`
	Country  string  `json:"country"`
}

// transactions are the payments API's data: amounts on both sides of the
// two agent versions' thresholds.
var transactions = []transaction{
	{"tx_1001", 120.00, "EUR", "cus_ada", "Corner Books", "DE"},
	{"tx_1002", 1200.00, "EUR", "cus_bob", "Night Flights", "MT"},
	{"tx_1003", 2400.00, "EUR", "cus_cyd", "Gold & Co", "CY"},
	{"tx_1004", 7800.00, "EUR", "cus_dan", "Watch Boutique", "AE"},
	{"tx_1005", 45.50, "EUR", "cus_bob", "Coffee Cart", "DE"},
	{"tx_1006", 3100.00, "EUR", "cus_eve", "Electronics Hub", "NL"},
	{"tx_1007", 680.00, "EUR", "cus_ada", "Hotel Aurora", "AT"},
}

const paymentsSpec = `{
  "openapi": "3.0.3",
  "info": {"title": "Demo payments", "version": "1.0.0", "description": "Card transactions and refunds."},
  "servers": [{"url": "%s"}],
  "paths": {
    "/transactions": {"get": {"operationId": "listTransactions", "summary": "List recent transactions",
      "parameters": [{"name": "customer_id", "in": "query", "schema": {"type": "string"}}],
      "responses": {"200": {"description": "Transactions", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Transaction"}}}}}}}},
    "/transactions/{id}": {"get": {"operationId": "getTransaction", "summary": "Get a transaction",
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "The transaction", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Transaction"}}}},
                    "404": {"description": "No such transaction"}}}},
    "/refunds": {"post": {"operationId": "createRefund", "summary": "Refund a transaction",
      "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["transaction_id", "amount"],
        "properties": {"transaction_id": {"type": "string"}, "amount": {"type": "number"}, "reason": {"type": "string"}}}}}},
      "responses": {"201": {"description": "The refund", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
  },
  "components": {"schemas": {"Transaction": {"type": "object", "properties": {
    "id": {"type": "string"}, "amount": {"type": "number"}, "currency": {"type": "string"},
    "customer_id": {"type": "string"}, "merchant": {"type": "string"}, "country": {"type": "string"}}}}}
}`

func paymentsHandler() http.Handler {
	mux := http.NewServeMux()
	var mu sync.Mutex
	refunds := 0
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, paymentsSpec, "http://"+r.Host)
	})
	mux.HandleFunc("GET /transactions", func(w http.ResponseWriter, r *http.Request) {
		out := []transaction{}
		for _, t := range transactions {
			if c := r.URL.Query().Get("customer_id"); c == "" || c == t.Customer {
				out = append(out, t)
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /transactions/{id}", func(w http.ResponseWriter, r *http.Request) {
		i := slices.IndexFunc(transactions, func(t transaction) bool { return t.ID == r.PathValue("id") })
		if i < 0 {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no transaction " + r.PathValue("id")})
			return
		}
		writeJSON(w, http.StatusOK, transactions[i])
	})
	mux.HandleFunc("POST /refunds", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TransactionID string  `json:"transaction_id"`
			Amount        float64 `json:"amount"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || req.TransactionID == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "transaction_id and amount are required"})
			return
		}
		mu.Lock()
		refunds++
		n := refunds
		mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"refund_id": fmt.Sprintf("re_%04d", n), "transaction_id": req.TransactionID,
			"amount": req.Amount, "status": "pending"})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

const customersSDL = `"""A customer of the card issuer."""
type Customer {
  id: ID!
  name: String!
  "Risk from 0 (none) to 1 (certain fraud), from the customer's history."
  riskScore: Float!
  accountAgeDays: Int!
  country: String!
}

type Query {
  "Look a customer up by id."
  customer(id: ID!): Customer
}
`

var customers = map[string]map[string]any{
	"cus_ada": {"id": "cus_ada", "name": "Ada Lindqvist", "riskScore": 0.05, "accountAgeDays": 2400, "country": "DE"},
	"cus_bob": {"id": "cus_bob", "name": "Bob Mercer", "riskScore": 0.62, "accountAgeDays": 35, "country": "MT"},
	"cus_cyd": {"id": "cus_cyd", "name": "Cyd Achterberg", "riskScore": 0.71, "accountAgeDays": 12, "country": "CY"},
	"cus_dan": {"id": "cus_dan", "name": "Dan Okafor", "riskScore": 0.40, "accountAgeDays": 400, "country": "AE"},
	"cus_eve": {"id": "cus_eve", "name": "Eve Marsh", "riskScore": 0.15, "accountAgeDays": 1800, "country": "NL"},
}

func (a *APIs) customersHandler() http.Handler {
	schema := gqlparser.MustLoadSchema(&ast.Source{Name: "customers.graphql", Input: customersSDL})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /schema.graphql", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, customersSDL) //nolint:errcheck // the client went away
	})
	mux.HandleFunc("POST /graphql", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Query     string         `json:"query"`
			Variables map[string]any `json:"variables"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []any{map[string]string{"message": "the body is not JSON"}}})
			return
		}
		doc, errs := gqlparser.LoadQueryWithRules(schema, req.Query, nil)
		if len(errs) > 0 {
			writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]string{"message": errs.Error()}}})
			return
		}
		if len(doc.Operations) != 1 || doc.Operations[0].Operation != ast.Query {
			writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]string{"message": "send one query"}}})
			return
		}
		select {
		case <-time.After(a.Delay):
		case <-r.Context().Done():
			return
		}
		data := map[string]any{}
		for _, sel := range doc.Operations[0].SelectionSet {
			f, ok := sel.(*ast.Field)
			if !ok || f.Name != "customer" {
				continue
			}
			args := f.ArgumentMap(req.Variables)
			id, _ := args["id"].(string)
			if c, ok := customers[id]; ok {
				data[f.Alias] = project(c, f.SelectionSet)
			} else {
				data[f.Alias] = nil
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": data})
	})
	return mux
}

// project keeps the selected fields of an object.
func project(obj map[string]any, set ast.SelectionSet) map[string]any {
	out := map[string]any{}
	for _, sel := range set {
		if f, ok := sel.(*ast.Field); ok {
			if f.Name == "__typename" {
				out[f.Alias] = "Customer"
			} else {
				out[f.Alias] = obj[f.Name]
			}
		}
	}
	return out
}

const casesWSDL = `<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="http://schemas.xmlsoap.org/wsdl/"
    xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
    xmlns:xs="http://www.w3.org/2001/XMLSchema"
    xmlns:tns="urn:demo:cases"
    targetNamespace="urn:demo:cases">
  <types>
    <xs:schema targetNamespace="urn:demo:cases" elementFormDefault="qualified">
      <xs:element name="OpenCase">
        <xs:complexType><xs:sequence>
          <xs:element name="transactionId" type="xs:string"/>
          <xs:element name="queue" type="xs:string"/>
          <xs:element name="reason" type="xs:string" minOccurs="0"/>
        </xs:sequence></xs:complexType>
      </xs:element>
      <xs:element name="OpenCaseResponse">
        <xs:complexType><xs:sequence>
          <xs:element name="caseId" type="xs:string"/>
          <xs:element name="status" type="xs:string"/>
        </xs:sequence></xs:complexType>
      </xs:element>
      <xs:element name="GetCase">
        <xs:complexType><xs:sequence><xs:element name="caseId" type="xs:string"/></xs:sequence></xs:complexType>
      </xs:element>
      <xs:element name="GetCaseResponse">
        <xs:complexType><xs:sequence>
          <xs:element name="caseId" type="xs:string"/>
          <xs:element name="transactionId" type="xs:string"/>
          <xs:element name="queue" type="xs:string"/>
          <xs:element name="status" type="xs:string"/>
        </xs:sequence></xs:complexType>
      </xs:element>
    </xs:schema>
  </types>
  <message name="OpenCaseIn"><part name="parameters" element="tns:OpenCase"/></message>
  <message name="OpenCaseOut"><part name="parameters" element="tns:OpenCaseResponse"/></message>
  <message name="GetCaseIn"><part name="parameters" element="tns:GetCase"/></message>
  <message name="GetCaseOut"><part name="parameters" element="tns:GetCaseResponse"/></message>
  <portType name="Cases">
    <operation name="OpenCase"><documentation>Open a fraud case for a transaction.</documentation>
      <input message="tns:OpenCaseIn"/><output message="tns:OpenCaseOut"/></operation>
    <operation name="GetCase"><documentation>Read a case.</documentation>
      <input message="tns:GetCaseIn"/><output message="tns:GetCaseOut"/></operation>
  </portType>
  <binding name="CasesSoap" type="tns:Cases">
    <soap:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>
    <operation name="OpenCase"><soap:operation soapAction="urn:demo:cases#OpenCase"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation>
    <operation name="GetCase"><soap:operation soapAction="urn:demo:cases#GetCase"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation>
  </binding>
  <service name="CaseService">
    <port name="CasesPort" binding="tns:CasesSoap"><soap:address location="%s/soap"/></port>
  </service>
</definitions>
`

// caseBook is the case-management service's state.
type caseBook struct {
	mu    sync.Mutex
	cases []map[string]string
}

// soapElement is any XML element with its children, for reading envelopes.
type soapElement struct {
	XMLName  xml.Name
	Text     string        `xml:",chardata"`
	Children []soapElement `xml:",any"`
}

func (b *caseBook) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cases.wsdl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		fmt.Fprintf(w, casesWSDL, "http://"+r.Host)
	})
	mux.HandleFunc("POST /soap", func(w http.ResponseWriter, r *http.Request) {
		var env soapElement
		if err := xml.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&env); err != nil || env.XMLName.Local != "Envelope" {
			soapFault(w, "soap:Client", "the request is not a SOAP envelope")
			return
		}
		var op *soapElement
		for i := range env.Children {
			if env.Children[i].XMLName.Local == "Body" && len(env.Children[i].Children) > 0 {
				op = &env.Children[i].Children[0]
			}
		}
		if op == nil {
			soapFault(w, "soap:Client", "the envelope has no body element")
			return
		}
		args := map[string]string{}
		for _, c := range op.Children {
			args[c.XMLName.Local] = strings.TrimSpace(c.Text)
		}
		resp, err := b.call(op.XMLName.Local, args)
		if err != nil {
			soapFault(w, "soap:Client", err.Error())
			return
		}
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		var body strings.Builder
		for _, k := range []string{"caseId", "transactionId", "queue", "status"} {
			if v, ok := resp[k]; ok {
				body.WriteString("<" + k + ">")
				xml.EscapeText(&body, []byte(v)) //nolint:errcheck // a Builder does not fail
				body.WriteString("</" + k + ">")
			}
		}
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><%sResponse xmlns="urn:demo:cases">%s</%sResponse></soap:Body></soap:Envelope>`,
			op.XMLName.Local, body.String(), op.XMLName.Local)
	})
	return mux
}

func (b *caseBook) call(op string, args map[string]string) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch op {
	case "OpenCase":
		if args["transactionId"] == "" || args["queue"] == "" {
			return nil, errors.New("transactionId and queue are required")
		}
		c := map[string]string{"caseId": fmt.Sprintf("CASE-%04d", len(b.cases)+1), "transactionId": args["transactionId"],
			"queue": args["queue"], "status": "open"}
		b.cases = append(b.cases, c)
		return c, nil
	case "GetCase":
		for _, c := range b.cases {
			if c["caseId"] == args["caseId"] {
				return c, nil
			}
		}
		return nil, fmt.Errorf("no case %q", args["caseId"])
	}
	return nil, fmt.Errorf("unknown operation %s", op)
}

func soapFault(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	var esc strings.Builder
	xml.EscapeText(&esc, []byte(msg)) //nolint:errcheck // a Builder does not fail
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><soap:Fault><faultcode>%s</faultcode><faultstring>%s</faultstring></soap:Fault></soap:Body></soap:Envelope>`,
		code, esc.String())
}
