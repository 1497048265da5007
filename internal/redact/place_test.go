package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlacedMasksShortValuesWhereTheCallPutThem: a three-character value
// a field pointer names is masked in the query, the path, a header, a
// JSON body, a form body and an XML body, by where the call put it; the
// token is the one the arguments show; what no pointer names stays.
func TestPlacedMasksShortValuesWhereTheCallPutThem(t *testing.T) {
	m := testMasker()
	tok := func(v string) string { return m.Token(Field, v) }
	esc := func(v string) string { return strings.NewReplacer("[", "%5B", "]", "%5D").Replace(v) }
	fields := []string{"/arguments/cvv", "/arguments/pin", "/arguments/code", "/arguments/card/cvv", "/arguments/*/zip", "/response/body/x"}
	req := Request{
		URL:    "https://u:pw@api.test/v1/cards/Zq1.json/pay?cvv=Zq2&page=1",
		Header: map[string][]string{"X-Pin": {"Zq3"}, "Accept": {"application/json"}},
		Body:   json.RawMessage(`{"card":{"cvv":"Zq4","holder":"ann"},"addr":{"zip":"Zq5"},"note":"Zq1"}`),
	}
	ep := "/v1/cards/Zq1.json/pay"
	places := []Place{
		{Arg: "/code", In: InPath, Start: strings.Index(ep, "Zq1"), End: strings.Index(ep, "Zq1") + 3},
		{Arg: "/cvv", In: InQuery, Name: "cvv"},
		{Arg: "/page", In: InQuery, Name: "page"},
		{Arg: "/pin", In: InHeader, Name: "X-Pin"},
		{Arg: "/card", In: InBody, Name: "/card"},
		{Arg: "/addr", In: InBody, Name: "/addr"},
		{Arg: "/note", In: InBody, Name: "/note"},
	}
	args := map[string]any{"code": "Zq1", "cvv": "Zq2", "page": "1", "pin": "Zq3",
		"card": map[string]any{"cvv": "Zq4", "holder": "ann"}, "addr": map[string]any{"zip": "Zq5"}, "note": "Zq1"}
	m.Placed(&req, places, fields, args)
	want := Request{
		URL:    "https://api.test/v1/cards/" + esc(tok("Zq1")) + ".json/pay?cvv=" + strings.NewReplacer("[", "%5B", "]", "%5D", ":", "%3A").Replace(tok("Zq2")) + "&page=1",
		Header: map[string][]string{"X-Pin": {tok("Zq3")}, "Accept": {"application/json"}},
		Body:   json.RawMessage(`{"addr":{"zip":"` + tok("Zq5") + `"},"card":{"cvv":"` + tok("Zq4") + `","holder":"ann"},"note":"Zq1"}`),
	}
	if diff := cmp.Diff(want, req); diff != "" {
		t.Errorf("Placed (-want +got):\n%s", diff)
	}

	form := Request{URL: "https://api.test/f", Body: json.RawMessage(`"cvv=Zq2&pin=Zq3&x=1"`)}
	m.Placed(&form, []Place{{Arg: "/cvv", In: InForm, Name: "cvv"}, {Arg: "/x", In: InForm, Name: "x"}}, fields, map[string]any{"cvv": "Zq2", "x": "1"})
	var got string
	_ = json.Unmarshal(form.Body, &got)
	if !strings.Contains(got, "Zq3") || strings.Contains(got, "Zq2") || !strings.Contains(got, "x=1") {
		t.Errorf("form body %s: want cvv masked, the rest kept", got)
	}

	envelope := `<e><cvv>Z&amp;9</cvv><holder>ann</holder></e>`
	at := strings.Index(envelope, "Z&amp;9")
	xml := Request{URL: "https://api.test/soap", Body: mustJSON(t, envelope)}
	m.Placed(&xml, []Place{{Arg: "/cvv", In: InXML, Start: at, End: at + len("Z&amp;9")}, {Arg: "/holder", In: InXML, Start: strings.Index(envelope, "ann"), End: strings.Index(envelope, "ann") + 3}},
		fields, map[string]any{"cvv": "Z&9", "holder": "ann"})
	_ = json.Unmarshal(xml.Body, &got)
	if want := `<e><cvv>` + tok("Z&9") + `</cvv><holder>ann</holder></e>`; got != want {
		t.Errorf("XML body %s, want %s", got, want)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAShortValueIsMaskedInLaterURLs: a short value masked once is masked
// later where a URL holds it whole (a span's url.full of the same call),
// not inside longer text.
func TestAShortValueIsMaskedInLaterURLs(t *testing.T) {
	m := testMasker()
	m.Fields(map[string]any{"cvv": "Zq9"}, RootArguments, []string{"/arguments/cvv"})
	got := m.URL("https://api.test/pay/Zq9?cvv=Zq9&ref=Zq9x", nil)
	if strings.Count(got, "Zq9") != 1 || !strings.Contains(got, "ref=Zq9x") {
		t.Errorf("URL = %s: want the whole values masked, Zq9x kept", got)
	}
	if s := m.Text("code Zq9", nil); s != "code Zq9" {
		t.Errorf("Text = %q: a short value is not searched for in text", s)
	}
}

// TestAFullMaskerMasksWholeURLs: once more values were masked than a
// masker remembers, a value it could not remember is not kept in a URL:
// every path segment and query value is masked.
func TestAFullMaskerMasksWholeURLs(t *testing.T) {
	m := testMasker()
	for i := range maxKnown {
		m.Fields(map[string]any{"id": fmt.Sprintf("customer-%04d", i)}, RootResponse, []string{"/response/body/id"})
	}
	m.Fields(map[string]any{"id": "customer-late"}, RootResponse, []string{"/response/body/id"})
	got := m.URL("https://u:pw@api.test/customers/customer-late/orders?owner=customer-late&page=2", nil)
	if strings.Contains(got, "customer-late") || strings.Contains(got, "pw") || strings.Contains(got, "page=2") {
		t.Errorf("URL = %s: want every path segment and query value masked, no user information", got)
	}
	if !strings.HasPrefix(got, "https://api.test/") || !strings.Contains(got, "redacted:url:") {
		t.Errorf("URL = %s: want the origin kept and url tokens", got)
	}
	if got := m.URL("https://api.test/customers/customer-0001", nil); strings.Contains(got, "customer-0001") {
		t.Errorf("a value remembered is still masked: %s", got)
	}
}

// TestUserInformationIsNeverKept: a URL with nothing else to mask loses
// its user name and password all the same.
func TestUserInformationIsNeverKept(t *testing.T) {
	m := testMasker()
	if got := m.URL("https://svc:s3cret@api.test/x?a=1", nil); got != "https://api.test/x?a=1" {
		t.Errorf("URL = %s", got)
	}
	req := Request{URL: "https://svc:s3cret@api.test/x"}
	m.Placed(&req, nil, nil, nil)
	if req.URL != "https://api.test/x" {
		t.Errorf("Placed URL = %s", req.URL)
	}
}
