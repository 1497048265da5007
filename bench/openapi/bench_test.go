package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/openapi"
	"github.com/agentplane/agentplane/internal/tool/openapi/octokit"
)

// go test -bench . -benchmem ./bench/openapi/
func BenchmarkOpenAPI(b *testing.B) {
	dir, err := octokit.Dir(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	github, err := os.ReadFile(filepath.Join(dir, "api.github.com.json"))
	if err != nil {
		b.Fatal(err)
	}
	synth, _ := synthetic(len(github))
	for _, doc := range []struct {
		name string
		data []byte
	}{{"github", github}, {"synthetic", synth}} {
		b.Run(doc.name+"/unmarshal", func(b *testing.B) {
			b.SetBytes(int64(len(doc.data)))
			for b.Loop() {
				var v any
				if err := json.Unmarshal(doc.data, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(doc.name+"/import", func(b *testing.B) {
			b.SetBytes(int64(len(doc.data)))
			im := openapi.New()
			for b.Loop() {
				if _, err := im.Import(context.Background(), tool.Source{Data: doc.data}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSynthetic: the synthetic document has the operations it claims.
func TestSynthetic(t *testing.T) {
	doc, ops := synthetic(200 << 10)
	spec, err := openapi.New().Import(context.Background(), tool.Source{Data: doc})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Operations) != ops {
		t.Errorf("got %d operations, want %d", len(spec.Operations), ops)
	}
}
