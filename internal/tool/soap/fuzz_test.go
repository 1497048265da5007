package soap

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
	for _, name := range []string{"stock.wsdl", "split.wsdl", "messages.wsdl", "types/echo.xsd", "wsdl20.wsdl", "unknown-message.wsdl"} {
		f.Add(readFile(f, name))
	}
	// Every import fails, so fuzzing never dials.
	fetch := func(context.Context, string) ([]byte, error) { return nil, errors.New("no network in fuzzing") }
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := (&Importer{Fetch: fetch}).Import(context.Background(), tool.Source{Data: data, URL: "https://example.com/a.wsdl"})
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
