package redact

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func testMasker() *Masker {
	return &Masker{key: []byte("0123456789abcdef0123456789abcdef"), known: map[string]string{}}
}

func TestDetectors(t *testing.T) {
	m := testMasker()
	tests := []struct {
		kind  string
		text  string
		found []string // the values masked, normalized, in order
	}{
		{Email, "write to Jane.Doe+billing@Example.co.uk today", []string{"jane.doe+billing@example.co.uk"}},
		{Email, "a@b.io and ops@mail.example.com", []string{"a@b.io", "ops@mail.example.com"}},
		{Email, "no host: foo@bar, user@localhost, @example.com", nil},

		{PaymentCard, "card 4111 1111 1111 1111 on file", []string{"4111111111111111"}},
		{PaymentCard, "mc 5500-0000-0000-0004, amex 378282246310005", []string{"5500000000000004", "378282246310005"}},
		{PaymentCard, "visa 4012888888881881", []string{"4012888888881881"}},
		{PaymentCard, "id 4111111111111112 fails Luhn", nil},
		{PaymentCard, "order 1234567812345678", nil},
		{PaymentCard, "twelve 411111111111 is too short", nil},
		{PaymentCard, "part of a word X4111111111111111", nil},

		{IBAN, "pay DE89 3704 0044 0532 0130 00 now", []string{"DE89370400440532013000"}},
		{IBAN, "GB82WEST12345698765432.", []string{"GB82WEST12345698765432"}},
		{IBAN, "FR14 2004 1010 0505 0001 3M02 606 AND MORE", []string{"FR1420041010050500013M02606"}},
		{IBAN, "NL91ABNA0417164300", []string{"NL91ABNA0417164300"}},
		{IBAN, "bad check DE89370400440532013001", nil},
		{IBAN, "short GB82WEST1234569876543", nil},
		{IBAN, "unknown country ZZ89370400440532013000", nil},

		{Phone, "call +1 415 555 2671", []string{"+14155552671"}},
		{Phone, "London +44 20 7946 0958.", []string{"+442079460958"}},
		{Phone, "E.164 +14155552671", []string{"+14155552671"}},
		{Phone, "office (415) 555-2671 or 415-555-2671", []string{"4155552671", "4155552671"}},
		{Phone, "Berlin 030 1234567", []string{"0301234567"}},
		{Phone, "order 1234567890", nil},
		{Phone, "order ORD-555-123-4567", nil},
		{Phone, "order #415-555-2671", nil},
		{Phone, "invoice 2024-123-4567", nil},
		{Phone, "date 2024-01-15, zip 94103", nil},

		{IPAddress, "from 192.168.1.20 and 2001:db8::1", []string{"2001:db8::1", "192.168.1.20"}},
		{IPAddress, "mapped ::ffff:10.0.0.1", []string{"::ffff:10.0.0.1"}},
		{IPAddress, "version v1.2.3.4, release 1.2.3.4.5, not 999.1.1.1", nil},
		{IPAddress, "at 10:30:00 the :: route", nil},
	}
	for _, tc := range tests {
		t.Run(tc.kind+"/"+tc.text, func(t *testing.T) {
			got := m.Text(tc.text, []string{tc.kind})
			want := tc.text
			for _, v := range tc.found {
				if !strings.Contains(got, m.Token(tc.kind, v)) {
					t.Errorf("Text(%q) = %q, want the token of %q in it", tc.text, got, v)
				}
			}
			if tc.found == nil && got != want {
				t.Errorf("Text(%q) = %q, want it unchanged", tc.text, got)
			}
			if n := strings.Count(got, "[redacted:"); n != len(tc.found) {
				t.Errorf("Text(%q) = %q: %d tokens, want %d", tc.text, got, n, len(tc.found))
			}
			if again := m.Text(got, Detectors); again != got {
				t.Errorf("masking again changed %q to %q", got, again)
			}
		})
	}
}

func TestEqualValuesStayEqual(t *testing.T) {
	m := testMasker()
	a := m.Text("4111 1111 1111 1111", []string{PaymentCard})
	b := m.Text("4111-1111-1111-1111", []string{PaymentCard})
	if a != b || !tokenRE.MatchString(a) {
		t.Fatalf("the same card masked as %q and %q", a, b)
	}
	other := &Masker{key: []byte("another tenant's key"), known: map[string]string{}}
	if c := other.Text("4111 1111 1111 1111", []string{PaymentCard}); c == a {
		t.Errorf("two keys gave the same token %q", c)
	}
}

func TestValidate(t *testing.T) {
	c := &Config{
		Fields:  []string{"/arguments/customer/email", "/response/body/items/*/iban", "arguments/x", "/arguments/a~2b", "/body/x", "/request/body"},
		Headers: []string{"X-Customer-Email", "bad header"},
		Detect:  []string{"email", "ssn"},
	}
	var got []string
	c.Validate("redact", func(field, format string, args ...any) { got = append(got, field) })
	want := []string{"redact.fields[2]", "redact.fields[3]", "redact.fields[4]", "redact.headers[1]", "redact.detect[1]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields refused (-want +got):\n%s", diff)
	}
	if _, err := ParseDetectors("email, iban,ssn"); err == nil || !strings.Contains(err.Error(), "payment_card") {
		t.Errorf("ParseDetectors accepted an unknown detector or did not list the known ones: %v", err)
	}
	if d, err := ParseDetectors("email,iban,email"); err != nil || len(d) != 2 {
		t.Errorf("ParseDetectors = %v, %v", d, err)
	}
}

func TestJSONFields(t *testing.T) {
	m := testMasker()
	doc := json.RawMessage(`{"items":[{"name":"Ann","tax_id":"AB-123-456","n":1234567},{"name":"Bob","tax_id":"CD-999"}],"note":"<b>"}`)
	fields := []string{"/response/body/items/*/tax_id", "/response/body/items/0/n", "/arguments/name"}
	got := m.JSON(doc, RootResponse, fields, nil)
	v, _ := Decode(got)
	items := v.(map[string]any)["items"].([]any)
	first, second := items[0].(map[string]any), items[1].(map[string]any)
	if first["tax_id"] != m.Token(Field, "AB-123-456") || second["tax_id"] != m.Token(Field, "CD-999") || first["n"] != m.Token(Field, "1234567") {
		t.Errorf("fields not masked: %s", got)
	}
	if first["name"] != "Ann" || v.(map[string]any)["note"] != "<b>" {
		t.Errorf("other values changed: %s", got)
	}
	// A value masked by a field is masked wherever it appears later.
	if s := m.Text("GET /customers/AB-123-456/orders", nil); s != "GET /customers/"+m.Token(Field, "AB-123-456")+"/orders" {
		t.Errorf("remembered value not masked in text: %q", s)
	}
	// Masked again, nothing changes.
	if again := m.JSON(got, RootResponse, fields, Detectors); string(again) != string(got) {
		t.Errorf("masking twice changed %s to %s", got, again)
	}
	// Nothing to mask: the bytes are kept.
	raw := json.RawMessage(`{ "a": 1 }`)
	if out := m.JSON(raw, RootArguments, nil, Detectors); string(out) != string(raw) {
		t.Errorf("unmasked document rewritten: %s", out)
	}
}

func TestHeaders(t *testing.T) {
	m := testMasker()
	h := map[string][]string{"X-Customer-Email": {"jane@example.com"}, "Accept": {"application/json"}, "X-Trace": {"from 10.1.2.3"}}
	m.Headers(h, []string{"x-customer-email"}, []string{IPAddress})
	if h["X-Customer-Email"][0] != m.Token(Header, "jane@example.com") || h["Accept"][0] != "application/json" || h["X-Trace"][0] != "from "+m.Token(IPAddress, "10.1.2.3") {
		t.Errorf("headers: %v", h)
	}
}

type memKeys map[string][]byte

func (k memKeys) RedactionKey(_ context.Context, tenant string, fresh []byte) ([]byte, error) {
	if _, ok := k[tenant]; !ok {
		k[tenant] = fresh
	}
	return k[tenant], nil
}

func TestServiceKeysPerTenant(t *testing.T) {
	keys := memKeys{}
	s := &Service{Keys: keys, Detect: []string{Email}}
	a, _ := s.Masker(context.Background(), "acme")
	a2, _ := s.Masker(context.Background(), "acme")
	b, _ := s.Masker(context.Background(), "globex")
	if a.Text("x@example.com", a.Detectors()) != a2.Text("x@example.com", a2.Detectors()) {
		t.Error("one tenant's maskers disagree")
	}
	if a.Token(Email, "x@example.com") == b.Token(Email, "x@example.com") {
		t.Error("two tenants share a key")
	}
	var none *Service
	if m, err := none.Masker(context.Background(), "acme"); m != nil || err != nil || m.Text("x@example.com", Detectors) != "x@example.com" {
		t.Error("a nil service masks")
	}
}
