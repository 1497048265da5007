package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/call"
	"github.com/agentplane/agentplane/internal/tool/graphql"
	"github.com/agentplane/agentplane/internal/tool/mcptool"
	"github.com/agentplane/agentplane/internal/tool/openapi"
	"github.com/agentplane/agentplane/internal/tool/soap"
	"github.com/agentplane/agentplane/internal/workflow"
)

// toolFlags configure tools: outgoing requests, secrets and calls.
type toolFlags struct {
	allowPrivate     bool
	allowFileSpecs   bool
	allowFileSecrets bool
	secretRefAllow   []string
	specMaxBytes     int64
	toolTimeout      time.Duration
}

func (f *toolFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.allowPrivate, "allow-private-networks", false, "allow outgoing requests to loopback, private and link-local addresses")
	fs.BoolVar(&f.allowFileSpecs, "allow-file-specs", false, "allow file:// spec_url values")
	fs.BoolVar(&f.allowFileSecrets, "allow-file-secrets", false, "allow file:// secret references (they must also match --secret-ref-allow)")
	fs.StringSliceVar(&f.secretRefAllow, "secret-ref-allow", []string{"env://TOOL_*"}, "secret references tenants may use, with * and {tenant}; repeatable")
	fs.Int64Var(&f.specMaxBytes, "spec-max-bytes", 32<<20, "largest specification document accepted")
	fs.DurationVar(&f.toolTimeout, "tool-timeout", 30*time.Second, "time limit of one tool call, retries included")
}

// runFlags configure workflows.
type runFlags struct {
	workflowTimeout  time.Duration
	lease            time.Duration
	defaultToolCalls int
	maxToolCalls     int
	maxRunning       int
	llmBaseURL       string
	llmModel         string
	llmAPIKeyRef     string
	// otelCaptureContent puts message content on the GenAI spans; the
	// llm pool's options take it (wired when the pool replaces
	// workflow.OpenAIDefault).
	otelCaptureContent bool
}

func (f *runFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.workflowTimeout, "workflow-timeout", 5*time.Minute, "workflows running longer end with outcome timed_out")
	fs.DurationVar(&f.lease, "workflow-lease", 15*time.Second, "how long a replica owns a workflow or replay batch without renewing; another resumes it after")
	fs.IntVar(&f.defaultToolCalls, "default-tool-calls", 20, "max_tool_calls when an invocation does not say")
	fs.IntVar(&f.maxToolCalls, "max-tool-calls", 100, "largest max_tool_calls an invocation may ask for")
	fs.IntVar(&f.maxRunning, "max-running", 1000, "workflow executions running at once on this server; further ones queue until one ends")
	fs.StringVar(&f.llmBaseURL, "llm-base-url", "", "OpenAI-compatible chat-completions base URL for plan steps (off when empty)")
	fs.StringVar(&f.llmModel, "llm-model", "", "model for plan steps")
	fs.StringVar(&f.llmAPIKeyRef, "llm-api-key-ref", "", "secret reference (env://, file://, vault://) of the LLM API key")
	fs.BoolVar(&f.otelCaptureContent, "otel-capture-content", false, "record completions' message content on their spans (off: token counts and models only)")
}

// toolParts are the pieces built from toolFlags.
type toolParts struct {
	service  *tool.Service
	executor *call.Executor
	client   *outbound.Client
	resolver *secrets.Resolver
}

func newToolParts(f toolFlags, st store) (*toolParts, error) {
	out := outbound.New(outbound.Options{AllowPrivate: f.allowPrivate, AllowFile: f.allowFileSpecs, MaxBytes: f.specMaxBytes})
	policy, err := secrets.NewPolicy(f.secretRefAllow, f.allowFileSecrets)
	if err != nil {
		return nil, fmt.Errorf("--secret-ref-allow: %w", err)
	}
	resolver, err := secrets.NewResolver(secrets.Options{Policy: policy, VaultHTTPClient: out.HTTPClient()})
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	introspect := tool.IntrospectorFunc(func(ctx context.Context, endpoint string) ([]byte, error) {
		body, _ := json.Marshal(map[string]string{"query": graphql.IntrospectionQuery})
		return out.PostJSON(ctx, endpoint, body)
	})
	fetchImport := func(ctx context.Context, url string) ([]byte, error) {
		data, _, err := out.Fetch(ctx, url)
		return data, err
	}
	svc := &tool.Service{
		Store:   st,
		Fetcher: out,
		Importers: map[string]tool.Importer{
			tool.OpenAPI: openapi.New(),
			tool.GraphQL: graphql.Importer{},
			tool.SOAP:    &soap.Importer{Fetch: fetchImport},
			tool.MCP:     mcptool.Importer{},
		},
		MCPLister:    mcptool.Lister{HTTP: out.HTTPClient(), MaxBytes: f.specMaxBytes},
		Introspector: introspect,
		Secrets:      policy,
		MaxSpecBytes: int(f.specMaxBytes),
		Now:          time.Now,
	}
	exec := call.New(call.Options{Client: out, Secrets: resolver, Timeout: f.toolTimeout})
	svc.Calls = exec
	return &toolParts{service: svc, executor: exec, client: out, resolver: resolver}, nil
}

// newRunner builds the workflow runner, with a planner when an LLM is configured.
func newRunner(ctx context.Context, f runFlags, st store, parts *toolParts, logger *slog.Logger) (*workflow.Runner, error) {
	opts := workflow.Options{
		Store: st, Versions: st, Tools: st, Caller: parts.executor,
		Lease: f.lease, Timeout: f.workflowTimeout, Logger: logger,
		DefaultToolCalls: f.defaultToolCalls, MaxToolCalls: f.maxToolCalls, MaxRunning: f.maxRunning,
	}
	if f.llmBaseURL != "" {
		if f.llmModel == "" {
			return nil, fmt.Errorf("--llm-model is required with --llm-base-url")
		}
		key := ""
		if f.llmAPIKeyRef != "" {
			policy, err := secrets.NewPolicy([]string{f.llmAPIKeyRef}, true)
			if err != nil {
				return nil, fmt.Errorf("--llm-api-key-ref: %w", err)
			}
			r, err := secrets.NewResolver(secrets.Options{Policy: policy, VaultHTTPClient: parts.client.HTTPClient()})
			if err != nil {
				return nil, err
			}
			if key, err = r.Resolve(ctx, "", f.llmAPIKeyRef); err != nil {
				return nil, fmt.Errorf("--llm-api-key-ref: %w", err)
			}
		}
		def := workflow.NewOpenAIDefault(f.llmBaseURL, f.llmModel, key, parts.client.HTTPClient())
		opts.Models, opts.LLM = def, def
	}
	return workflow.New(opts), nil
}
