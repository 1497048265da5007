package relevance

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/graphql"
	"github.com/agentplane/agentplane/internal/tool/openapi"
	"github.com/agentplane/agentplane/internal/tool/soap"
)

// Importer is the importer of a document kind: openapi, graphql or soap.
func Importer(kind string) (tool.Importer, error) {
	switch kind {
	case "openapi":
		return openapi.New(), nil
	case "graphql":
		return graphql.Importer{}, nil
	case "soap":
		return &soap.Importer{}, nil
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

// Import reads a document with the importer of its kind.
func Import(ctx context.Context, d realdocs.Doc) (*tool.Spec, error) {
	data, err := d.Read(ctx)
	if err != nil {
		return nil, err
	}
	im, err := Importer(d.Kind)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name, err)
	}
	return im.Import(ctx, tool.Source{Data: data})
}
