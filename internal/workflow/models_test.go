package workflow_test

import (
	"context"

	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/problem"
)

// modelTable is a registry holding the server-wide default model and the
// models it maps, the same for every tenant.
type modelTable map[string]*model.Model

func (ms modelTable) Model(_ context.Context, tenant, name string) (*model.Model, error) {
	if m, ok := ms[name]; ok {
		c := *m
		c.Tenant, c.Name = tenant, name
		return &c, nil
	}
	if name == model.DefaultName {
		return &model.Model{Name: name, Provider: model.OpenAI, Model: "scripted-1"}, nil
	}
	return nil, problem.New(problem.NotFound, "no model named %q", name)
}
