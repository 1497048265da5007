package agent

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeArgs(t *testing.T) {
	got, err := DecodeArgs([]byte(` {"id": 1234567890123456789, "page": {"size": 1.0}, "tags": [1e21, "x"]} `))
	want := map[string]any{"id": json.Number("1234567890123456789"), "page": map[string]any{"size": json.Number("1.0")},
		"tags": []any{json.Number("1e21"), "x"}}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("%v, (-want +got):\n%s", err, diff)
	}
	if got, err := DecodeArgs([]byte("null")); err != nil || got != nil {
		t.Errorf("null: %v, %v", got, err)
	}
	for _, bad := range []string{``, `[1]`, `"x"`, `{} {}`, `{"a":1} x`, `{"a":1`} {
		if got, err := DecodeArgs([]byte(bad)); err == nil {
			t.Errorf("%q: %v, want an error, as json.Unmarshal gives", bad, got)
		}
	}
}
