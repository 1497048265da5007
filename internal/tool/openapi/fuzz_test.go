package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// FuzzImport: any input gives either a spec whose schemas are valid JSON and
// whose ids are unique, or a *problem.Error; never a panic. The documents in
// testdata are seeds besides testdata/fuzz/FuzzImport.
func FuzzImport(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	im := New()
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := im.Import(context.Background(), tool.Source{Data: data, URL: "https://example.com/spec"})
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *problem.Error", err, err)
			}
			return
		}
		seen := make(map[string]bool)
		for _, op := range spec.Operations {
			if seen[op.ID] {
				t.Errorf("duplicate operation id %q", op.ID)
			}
			seen[op.ID] = true
			schemas := []json.RawMessage{op.Input, op.Output}
			for _, p := range op.HTTP.Params {
				schemas = append(schemas, p.Schema)
			}
			if op.HTTP.Body != nil {
				schemas = append(schemas, op.HTTP.Body.Schema)
			}
			for _, s := range schemas {
				if s != nil && !json.Valid(s) {
					t.Errorf("operation %q: invalid schema JSON %q", op.ID, s)
				}
			}
		}
	})
}

// FuzzDecodeJSON: reading the top levels token by token gives what decoding
// the document whole gives, value or refusal.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `{"a": {"b": [1, 2.50, {"c": null}]}, "a": true}`, `[[1], {"x": [[]]}]`,
		`"s"`, `12345678901234567890`, `{"a": 1,]`, `{"a" 1}`, `{"a": [1, 2}`, `{"a": {}} x`, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		wantErr := dec.Decode(&want)
		if wantErr == nil {
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				wantErr = errors.New("trailing data")
			}
		}
		got, err := decodeJSON(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decodeJSON error %v, whole decode %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeJSON %#v, whole decode %#v", got, want)
		}
	})
}
