package jsonbody

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestUntypedNumbersKeepTheirDigits checks that a number in an untyped
// value is written back as it was sent: as a float64, 12345678901234567891
// would come back as 12345678901234567000.
func TestUntypedNumbersKeepTheirDigits(t *testing.T) {
	var req struct {
		Context map[string]any `json:"context"`
		Max     int            `json:"max"`
	}
	if err := Decode([]byte(`{"context": {"account": 12345678901234567891, "rate": 0.1}, "max": 3}`), &req); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(req.Context)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"account":12345678901234567891,"rate":0.1}`; string(out) != want || req.Max != 3 {
		t.Errorf("context written back as %s (max %d), want %s (max 3)", out, req.Max, want)
	}
}

func TestNULAndInvalidUTF8AreRefused(t *testing.T) {
	var v map[string]any
	for body, want := range map[string]string{
		`{"a": "x\u0000y"}`:   "NUL character",
		`{"a": "x\\\u0000"}`:  "NUL character",
		`{"a": "x\\u0000"}`:   "",
		"{\"a\": \"x\xffy\"}": "not valid UTF-8",
		`{"a": "é\u0001"}`:    "",
	} {
		err := Decode([]byte(body), &v)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", body, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
