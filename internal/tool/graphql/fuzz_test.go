package graphql

import (
	"context"
	"errors"
	"testing"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// FuzzImport checks that any document yields a Spec or a *problem.Error,
// never a panic, and that operation ids are unique.
func FuzzImport(f *testing.F) {
	for _, name := range []string{"schema.graphql", "defaults.graphql", "duplicate.graphql", "malformed.graphql"} {
		f.Add(readFile(f, name))
	}
	f.Add(introspect(f, loadSchema(f, "schema.graphql"), true))
	f.Add([]byte(`type Query { x: Int query_x: Int } type Mutation { x: Int }`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Importer{}.Import(context.Background(), tool.Source{Data: data})
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error is not a *problem.Error: %v", err)
			}
			return
		}
		ids := map[string]bool{}
		for _, op := range spec.Operations {
			if op.ID == "" || ids[op.ID] {
				t.Fatalf("empty or duplicate operation id %q", op.ID)
			}
			ids[op.ID] = true
		}
	})
}
