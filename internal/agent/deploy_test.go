package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

// catalogsFunc builds catalogs with a function.
type catalogsFunc func(ctx context.Context, tenant string, tools, models []string) (*Catalog, error)

func (f catalogsFunc) Catalog(ctx context.Context, tenant string, tools, models []string) (*Catalog, error) {
	return f(ctx, tenant, tools, models)
}

func TestNewVersion(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	v, err := NewVersion(context.Background(), catalogsFunc(func(_ context.Context, tenant string, _, _ []string) (*Catalog, error) {
		if tenant != "acme" {
			t.Errorf("catalog of tenant %q, want acme", tenant)
		}
		return testCatalog(), nil
	}), "acme", Deployment{Name: "triage", Version: "2", Description: "d", Definition: json.RawMessage(validBase)}, at)
	if err != nil {
		t.Fatal(err)
	}
	want := &Version{Tenant: "acme", Name: "triage", Version: "2", Description: "d",
		Definition: json.RawMessage(validBase), Tools: []string{"payments", "cases"}, DeployedAt: at}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("version (-want +got):\n%s", diff)
	}
}

func TestNewVersionErrors(t *testing.T) {
	catalogs := catalogsFunc(func(context.Context, string, []string, []string) (*Catalog, error) { return testCatalog(), nil })
	tests := []struct {
		name string
		d    Deployment
		want []problem.FieldError
	}{
		{
			name: "every field wrong",
			d:    Deployment{Name: "Triage", Version: "-1", Description: strings.Repeat("x", 2001)},
			want: []problem.FieldError{
				{Field: "name", Message: "must match ^[a-z][a-z0-9-]{0,62}$"},
				{Field: "version", Message: "must match ^[0-9A-Za-z][0-9A-Za-z.+_-]{0,31}$"},
				{Field: "description", Message: "must be at most 2000 characters"},
				{Field: "definition", Message: "is required"},
			},
		},
		{
			name: "null definition",
			d:    Deployment{Name: "triage", Definition: json.RawMessage("null")},
			want: []problem.FieldError{{Field: "definition", Message: "is required"}},
		},
		{
			name: "definition that does not decode",
			d:    Deployment{Name: "triage", Definition: json.RawMessage(`{"tools": [], "steps": [], "extra": 1}`)},
			want: []problem.FieldError{{Field: "definition.extra", Message: `unknown field "extra"`}},
		},
		{
			name: "definition that does not compile",
			d:    Deployment{Name: "triage", Definition: json.RawMessage(strings.Replace(validBase, `"cases"]`, `"cases", "ghost"]`, 1))},
			want: []problem.FieldError{{Field: "definition.tools[2]", Message: `no tool named "ghost" is registered`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewVersion(context.Background(), catalogs, "acme", tc.d, time.Now())
			pe := problem.As(err)
			if pe.Code != problem.ValidationFailed {
				t.Fatalf("error = %v, want validation-failed", err)
			}
			if diff := cmp.Diff(tc.want, pe.Errors); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("catalog error", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := NewVersion(context.Background(), catalogsFunc(func(context.Context, string, []string, []string) (*Catalog, error) {
			return nil, boom
		}), "acme", Deployment{Name: "triage", Definition: json.RawMessage(validBase)}, time.Now())
		if !errors.Is(err, boom) {
			t.Errorf("error = %v, want the catalog's", err)
		}
	})
}
