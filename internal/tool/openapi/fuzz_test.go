package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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
