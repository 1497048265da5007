package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"

	"github.com/gowebpki/jcs"
)

// requestOf is a request with one of each part, made of the fuzzer's
// values.
func requestOf(model, content, name, args string, temp float64, maxTokens int64, schema []byte) ChatRequest {
	return ChatRequest{
		Model: model,
		Messages: []ChatMessage{
			{Role: RoleSystem, Content: content},
			{Role: RoleUser, Content: name + content},
			{Role: RoleAssistant, ToolCalls: []ChatToolCall{{ID: "call_" + name, Name: name, Arguments: args}, {ID: "2", Name: "b", Arguments: "{}"}}},
			{Role: RoleTool, Content: args, ToolCallID: "call_" + name},
		},
		Tools:           []ChatTool{{Name: name, Description: content, Parameters: schema}, {Name: "plain", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Temperature:     &temp,
		MaxOutputTokens: maxTokens,
		OutputSchema:    schema,
	}
}

// checkHash fails t unless Hash answers what the long way answers.
func checkHash(t *testing.T, r ChatRequest) {
	t.Helper()
	got, gerr := r.Hash()
	want, werr := r.hashOfEncoding()
	if got != want || (gerr == nil) != (werr == nil) {
		t.Fatalf("Hash() = %q, %v; encoded and canonicalized: %q, %v\nrequest %+v", got, gerr, want, werr, r)
	}
}

func TestHashIsTheCanonicalEncodingsHash(t *testing.T) {
	schema := json.RawMessage(` {"type": "object", "required": ["b", "a"], "properties": {"b": {"type": "number", "maximum": 1E3}, "a": {"enum": ["<&>", "\u2028", "é"]}}} `)
	cases := map[string]ChatRequest{
		"empty":             {},
		"no messages":       {Model: "m", Messages: nil},
		"empty messages":    {Messages: []ChatMessage{}},
		"tools empty":       {Messages: []ChatMessage{{Role: "user"}}, Tools: []ChatTool{}},
		"nil parameters":    {Messages: []ChatMessage{{Role: "user"}}, Tools: []ChatTool{{Name: "t"}}},
		"html and controls": requestOf("gpt<5>&co", "a\"b\\c\b\f\n\r\t\x00\x01\x1f\x7f <script> & \u2028\u2029 é 😀", "n", `{"x": "<y>"}`, 0.2, 1024, schema),
		"invalid utf-8":     requestOf("m", "bad \xff\xfe bytes \xc3", "\xed\xa0\x80", "\x80", 1, 1, schema),
		"numbers":           requestOf("m", "c", "n", "{}", 1e21, 1<<60, schema),
		"small numbers":     requestOf("m", "c", "n", "{}", 1e-7, -3, schema),
		"negative zero":     requestOf("m", "c", "n", "{}", math.Copysign(0, -1), 0, schema),
		"zero temperature":  requestOf("m", "c", "n", "{}", 0, 9007199254740993, nil),
		"NaN":               requestOf("m", "c", "n", "{}", math.NaN(), 1, schema),
		"infinite":          requestOf("m", "c", "n", "{}", math.Inf(1), 1, schema),
		"bad schema":        requestOf("m", "c", "n", "{}", 1, 1, json.RawMessage(`{"a":`)),
		"schema of one":     requestOf("m", "c", "n", "{}", 1, 1, json.RawMessage(`1.50`)),
		"duplicate keys":    requestOf("m", "c", "n", "{}", 1, 1, json.RawMessage(`{"a":1,"a":2}`)),
		"deep schema":       requestOf("m", "c", "n", "{}", 1, 1, json.RawMessage(`{"b":[{"d":null,"c":true}],"a":{"z":"\u00e9\ud83d\ude00"}}`)),
		"integers past 2^53": requestOf("m", "bad \xff <&> \u2028", "n", `{"id":1234567890123456789}`, 0.1, -9007199254740993,
			json.RawMessage(`{"enum":[1234567890123456789,12345678901234567.89e2,1.0,1e21],"a":{"\u00e9":"\u0001"}}`)),
		"duplicate keys past 2^53": requestOf("m", "c", "n", "{}", 1, 1, json.RawMessage(`{"a":1234567890123456789,"a":2}`)),
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			checkHash(t, r)
			checkHash(t, r) // a schema the second time from the cache
		})
	}
}

// TestHashKeepsEveryDigit: two requests alike but for an integer past
// 2^53 that shares its double with the other's are two requests, while a
// request whose numbers are float64s, as json.Marshal writes them, keeps
// the hash of its RFC 8785 form, which its completions were recorded
// under.
func TestHashKeepsEveryDigit(t *testing.T) {
	hash := func(r ChatRequest) string {
		t.Helper()
		h, err := r.Hash()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	schema := func(id string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{"id":{"const":` + id + `}}}`)
	}
	a := requestOf("m", "c", "n", "{}", 0.2, 1024, schema("1234567890123456789"))
	b := requestOf("m", "c", "n", "{}", 0.2, 1024, schema("1234567890123456788"))
	if hash(a) == hash(b) {
		t.Errorf("the requests share a hash:\n%s\n%s", a.OutputSchema, b.OutputSchema)
	}

	floats := requestOf("m", "c", "n", `{"id":1234567890123456789}`, 0.2, 1024,
		json.RawMessage(`{"enum":[1234567890123456800,1e+21,0.1,-5,9007199254740992]}`))
	raw, err := json.Marshal(floats)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	if got, want := hash(floats), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Hash() = %s, want %s, the SHA-256 of its RFC 8785 form", got, want)
	}
}

func FuzzHash(f *testing.F) {
	f.Add("gpt-4o", "Is payment p1 settled?", "payments__get", `{"id":"p1"}`, 0.2, int64(1024), []byte(`{"type":"object","properties":{"id":{"type":"string"}}}`))
	f.Add("", "<\u2028>\x00", "\xff", "", math.Copysign(0, -1), int64(-1), []byte(`[1,2e3,"\u00e9"]`))
	f.Add("m", "c", "n", "{}", 0.5, int64(9007199254740993), []byte(`{"const":1234567890123456789,"enum":[1.0,"\u2028"]}`))
	f.Fuzz(func(t *testing.T, model, content, name, args string, temp float64, maxTokens int64, schema []byte) {
		checkHash(t, requestOf(model, content, name, args, temp, maxTokens, schema))
	})
}

// BenchmarkRequestHash hashes a plan step's second request (system, user,
// the assistant's call and its answer; two tools) both ways.
func BenchmarkRequestHash(b *testing.B) {
	r := requestOf("default", "Read the thing, then say done.", "svc__getThing", `{"id":"w123"}`, 0.2, 0,
		[]byte(`{"type":"object","required":["id"],"properties":{"id":{"type":"string","description":"the thing's id"}}}`))
	r.OutputSchema = nil
	for _, way := range []struct {
		name string
		hash func() (string, error)
	}{{"canonical", r.Hash}, {"encoded", r.hashOfEncoding}} {
		b.Run(way.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := way.hash(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
