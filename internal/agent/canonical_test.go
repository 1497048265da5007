package agent

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"
)

func TestCanonicalJSON(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"an integer past 2^53 keeps its digits", `{"id": 1234567890123456789}`, `{"id":1234567890123456789}`},
		{"its neighbour too", `{"id":1234567890123456788}`, `{"id":1234567890123456788}`},
		{"the double they share, as json.Marshal writes it", `{"id":1234567890123456800}`, `{"id":1234567890123456800}`},
		{"negative", `{"id":-1234567890123456789}`, `{"id":-1234567890123456789}`},
		{"2^53 + 1", `{"n":9007199254740993}`, `{"n":9007199254740993}`},
		{"2^53", `{"n":9007199254740992}`, `{"n":9007199254740992}`},
		{"written with an exponent", `{"n":12345678901234567.89e2}`, `{"n":1234567890123456789}`},
		{"past 1e21", `{"n":12345678901234567890123}`, `{"n":12345678901234567890123}`},
		{"a double past 1e21, as json.Marshal writes it", `{"n":1.2345678901234568e+22}`, `{"n":1.2345678901234568e+22}`},
		{"ordinary numbers as RFC 8785", `{"b":1.0,"a":1e21,"c":1000000000000000000000,"d":-0,"e":0.1,"f":1E3}`,
			`{"a":1e+21,"b":1,"c":1e+21,"d":0,"e":0.1,"f":1000}`},
		{"a fraction past 2^53 as its double", `{"n":1234567890123456789.5}`, `{"n":1234567890123456800}`},
		{"digits in a string stay a string", `{"s":"1234567890123456789","t":"a\"b"}`, `{"s":"1234567890123456789","t":"a\"b"}`},
		{"members in RFC 8785's order beside a wide integer", "{\"z\":[1.0,{\"\u00e9\":\"\\u0001\\n\\/\u20ac\",\"b\":12345678901234567891,\"\U0001F600\":true,\"\uFB01\":null}],\"a\":\"x\"}",
			"{\"a\":\"x\",\"z\":[1,{\"b\":12345678901234567891,\"\u00e9\":\"\\u0001\\n/\u20ac\",\"\U0001F600\":true,\"\uFB01\":null}]}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{`{"n":1e400}`, `{"n":1234567890123456789} {}`, `{"n":1234567890123456789`,
		`{"id":1234567890123456789,"id":1}`, "{\"id\":1234567890123456789,\"s\":\"\xff\"}", `{"id":1234567890123456789,"s":"\ud800"}`} {
		if got, err := CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("%q: %s, want an error", bad, got)
		}
	}
}

// TestCanonicalJSONOfFloats: a document json.Marshal made of float64s,
// as every call's arguments were recorded before they kept their digits,
// has exactly its RFC 8785 form, so that its calls still match.
func TestCanonicalJSONOfFloats(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	values := []any{1 << 53, 1<<53 + 2, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1e21, 1e300, 0.1}
	for range 20000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		values = append(values, f, math.Round(f), math.Ldexp(r.Float64(), 53+r.IntN(30)))
	}
	for i := 0; i < len(values); i += 4 {
		raw, _ := json.Marshal(map[string]any{"v": values[i:min(i+4, len(values))]})
		want, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := CanonicalJSON(raw)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %s (%v), want %s", raw, got, err, want)
		}
	}
}

// FuzzCanonicalJSON: the form is RFC 8785's wherever no integer keeps its
// digits, and canonical again unchanged.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"id":1234567890123456789,"a":[1.0,"x"]}`, `{"b":1e21,"a":{"\u00e9":"\u0001"}}`, `[9007199254740993, -0, 0.5]`,
		`"\ud83d\ude00"`, `{"n":12345678901234567.89e2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want, err := jcs.Transform([]byte(in))
		if err != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(in)))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		got, err := appendCanonical(nil, v)
		if err != nil {
			t.Fatalf("%q: %v, RFC 8785 gives %s", in, err, want)
		}
		if !holdsWideInteger([]byte(in)) && !bytes.Equal(got, want) {
			t.Fatalf("%q: %s, RFC 8785 gives %s", in, got, want)
		}
		again, err := CanonicalJSON(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("%q: %s canonical again is %s (%v)", in, got, again, err)
		}
	})
}
