package audit

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

var canonicalCases = []struct {
	in   string
	want bool
}{
	{`{}`, true},
	{`{"action":"get_a","status":"ok","step":1}`, true},
	{`{"a":[1,-2,0,true,false,null,"x"],"b":{"c":{}}}`, true},
	{`{"s":"tab\there, quote\" slash\\ ctl\u001f del` + "\x7f" + ` é ☃"}`, true},
	{`{"step":1,"action":"a"}`, false}, // keys out of order
	{`{"a":1,"a":2}`, false},           // duplicate key
	{`{"a": 1}`, false},                // whitespace
	{`{"a":1.5}`, false},               // fractions go the general way
	{`{"a":1e3}`, false},               // exponents too
	{`{"a":0123}`, false},              // leading zero
	{`{"a":-0}`, false},                // negative zero
	{`{"a":1234567890123456}`, false},  // beyond 15 digits
	{`{"a":"\u003c"}`, false},          // json.Marshal's HTML escape
	{`{"a":"\u000a"}`, false},          // has a short form
	{`{"a":"\/"}`, false},              // not an escape JCS writes
	{`{"é":1}`, false},                 // non-ASCII keys go the general way
	{`{"a":"` + "\xff" + `"}`, false},  // invalid UTF-8
	{`{"a":1}x`, false},                // trailing bytes
	{`{"a":`, false},                   // truncated
	{`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, false}, // too deep
}

func TestIsCanonical(t *testing.T) {
	for _, tc := range canonicalCases {
		if got := isCanonical([]byte(tc.in)); got != tc.want {
			t.Errorf("isCanonical(%s) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestDetailsAreCanonical checks that what Details makes of the maps records
// carry takes the fast path.
func TestDetailsAreCanonical(t *testing.T) {
	for _, v := range []any{
		nil,
		map[string]any{"step": 3, "action": "fetch", "status": "ok"},
		map[string]any{"method": "GET", "path": "/v1/tools", "status": 200, "scopes": []string{"tools:read"}},
	} {
		if d := Details(v); !isCanonical(d) {
			t.Errorf("Details(%v) = %s is not taken as canonical", v, d)
		}
	}
}

// FuzzIsCanonical checks that whatever isCanonical accepts, the general
// canonicaliser leaves exactly as it is.
func FuzzIsCanonical(f *testing.F) {
	for _, tc := range canonicalCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isCanonical(b) {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		canon, err := jcs.Transform(b)
		if err != nil {
			t.Fatalf("accepted %q, which jcs refuses: %v", b, err)
		}
		if !bytes.Equal(canon, b) {
			t.Fatalf("accepted %q, canonical form %q", b, canon)
		}
	})
}
