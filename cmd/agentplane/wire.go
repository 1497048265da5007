package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentplane/agentplane/internal/catalogcache"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/internal/llm"
	"github.com/agentplane/agentplane/internal/model"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/redact"
	"github.com/agentplane/agentplane/internal/replay"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/telemetry"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/a2atool"
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
	allowHosts       []string
	allowFileSpecs   bool
	allowFileSecrets bool
	secretRefAllow   []string
	specMaxBytes     int64
	toolTimeout      time.Duration
	// limiter shares tools' limits (Redis with --redis-url) and metrics
	// observes their calls; serve sets both, not flags.
	limiter call.Limiter
	metrics call.Metrics
}

func (f *toolFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.allowPrivate, "allow-private-networks", false, "allow outgoing requests to loopback, private and link-local addresses")
	fs.StringArrayVar(&f.allowHosts, "allow-private-host", nil, "allow outgoing requests to this one private HOST[:PORT] (a loopback model server, say) without --allow-private-networks; repeatable")
	fs.BoolVar(&f.allowFileSpecs, "allow-file-specs", false, "allow file:// spec_url values")
	fs.BoolVar(&f.allowFileSecrets, "allow-file-secrets", false, "allow file:// secret references (they must also match --secret-ref-allow)")
	fs.StringSliceVar(&f.secretRefAllow, "secret-ref-allow", []string{"env://TOOL_*"}, "secret references tenants may use, with * and {tenant}; repeatable")
	fs.Int64Var(&f.specMaxBytes, "spec-max-bytes", 32<<20, "largest specification document accepted")
	fs.DurationVar(&f.toolTimeout, "tool-timeout", 30*time.Second, "time limit of one tool call, retries included")
}

// runFlags configure workflows.
type runFlags struct {
	workflowTimeout time.Duration
	// gatewayApprovalHold bounds how long the run gateway holds a call
	// for a person's decision.
	gatewayApprovalHold time.Duration
	lease               time.Duration
	defaultToolCalls    int
	maxToolCalls        int
	maxRunning          int
	redactDetect        string
	llmBaseURL          string
	llmModel            string
	llmAPIKeyRef        string
	llmProvider         string
	llmH2C              bool
	// otelCaptureContent puts message content on the GenAI spans.
	otelCaptureContent bool
}

func (f *runFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.workflowTimeout, "workflow-timeout", 5*time.Minute, "workflows running longer end with outcome timed_out")
	fs.DurationVar(&f.lease, "workflow-lease", 15*time.Second, "how long a replica owns a workflow or replay batch without renewing; another resumes it after")
	fs.IntVar(&f.defaultToolCalls, "default-tool-calls", 20, "max_tool_calls when an invocation does not say")
	fs.IntVar(&f.maxToolCalls, "max-tool-calls", 100, "largest max_tool_calls an invocation may ask for")
	fs.DurationVar(&f.gatewayApprovalHold, "gateway-approval-hold", 30*time.Second, "how long the run gateway holds an external agent's call that waits for an approval before setting the attempt aside")
	fs.IntVar(&f.maxRunning, "max-running", 1000, "workflow executions running at once on this server; further ones queue until one ends")
	fs.StringVar(&f.redactDetect, "redact-detect", "", "detectors run over every tool's calls, masking what they find before it is stored: comma-separated, of "+strings.Join(redact.Detectors, ", "))
	fs.StringVar(&f.llmBaseURL, "llm-base-url", "", "API root of the server-wide model \"default\" every tenant may use, and of plan steps (off when empty)")
	fs.StringVar(&f.llmModel, "llm-model", "", "the provider's model id of the server-wide model (required with --llm-base-url)")
	fs.StringVar(&f.llmAPIKeyRef, "llm-api-key-ref", "", "secret reference (env://, file://, vault://) of the LLM API key")
	fs.StringVar(&f.llmProvider, "llm-provider", model.OpenAI, "wire format of the server-wide model \"default\": openai (Chat Completions) or anthropic (Messages)")
	fs.BoolVar(&f.llmH2C, "llm-http2-prior-knowledge", false, "speak HTTP/2 without TLS (h2c) to an http:// --llm-base-url, so completions in flight share a few connections; the model server must speak it")
	fs.BoolVar(&f.otelCaptureContent, "otel-capture-content", false, "record completions' message content on their spans (off: token counts and models only)")
}

// toolParts are the pieces built from toolFlags.
type toolParts struct {
	service  *tool.Service
	executor *call.Executor
	client   *outbound.Client
	resolver *secrets.Resolver
	policy   *secrets.Policy
}

func newToolParts(f toolFlags, st store) (*toolParts, error) {
	hosts := make([]outbound.AllowedHost, len(f.allowHosts))
	for i, h := range f.allowHosts {
		var err error
		if hosts[i], err = outbound.ParseAllowedHost(h); err != nil {
			return nil, fmt.Errorf("--allow-private-host %w", err)
		}
	}
	out := outbound.New(outbound.Options{AllowPrivate: f.allowPrivate, AllowHosts: hosts, AllowFile: f.allowFileSpecs, MaxBytes: f.specMaxBytes})
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
			tool.A2A:     a2atool.Importer{},
		},
		MCPLister:    mcptool.Lister{HTTP: out.HTTPClient(), MaxBytes: f.specMaxBytes},
		Introspector: introspect,
		Secrets:      policy,
		MaxSpecBytes: int(f.specMaxBytes),
		Now:          time.Now,
	}
	exec := call.New(call.Options{Client: out, Secrets: resolver, Timeout: f.toolTimeout, Limiter: f.limiter, Metrics: f.metrics})
	svc.Calls = exec
	return &toolParts{service: svc, executor: exec, client: out, resolver: resolver, policy: policy}, nil
}

// modelParts are the model registry and the lookup agents name models through.
type modelParts struct {
	service *model.Service
	// lookup finds a tenant's model or the server-wide "default".
	lookup model.Lookup
	// def is the server-wide model of the --llm-* flags, nil without them.
	def *model.Model
}

// newModelParts builds the registry, under the tools' secret and address
// policies, and the server-wide model when --llm-base-url is set.
func newModelParts(f runFlags, st store, parts *toolParts) (*modelParts, error) {
	var def *model.Model
	if f.llmBaseURL == "" && (f.llmModel != "" || f.llmAPIKeyRef != "" || f.llmProvider != model.OpenAI || f.llmH2C) {
		return nil, fmt.Errorf("--llm-model, --llm-api-key-ref, --llm-provider and --llm-http2-prior-knowledge define the server-wide model with --llm-base-url: give it too")
	}
	if f.llmBaseURL != "" {
		if f.llmModel == "" {
			return nil, fmt.Errorf("--llm-model is required with --llm-base-url")
		}
		var err error
		if def, err = model.ServerDefault(f.llmProvider, f.llmBaseURL, f.llmModel, f.llmAPIKeyRef, f.llmH2C); err != nil {
			return nil, fmt.Errorf("--llm-base-url, --llm-model, --llm-provider, --llm-http2-prior-knowledge: %w", err)
		}
	}
	svc := &model.Service{Store: st, Secrets: parts.policy, Addresses: parts.client, Now: time.Now}
	return &modelParts{service: svc, lookup: model.NewLookup(st, def), def: def}, nil
}

// newRunner builds the workflow runner, asking models through a pool of
// provider clients that shares the tools' outbound rules (private
// addresses, --allow-private-host) and secret policy.
func newRunner(f runFlags, st store, parts *toolParts, models *modelParts, metrics *telemetry.Metrics, logger *slog.Logger, publicURL string, arms workflow.ArmChooser, catalog *catalogcache.Cache) (*workflow.Runner, error) {
	opts := llm.Options{Outbound: parts.client, Secrets: parts.resolver, Metrics: metrics, CaptureContent: f.otelCaptureContent}
	if models.def != nil && f.llmAPIKeyRef != "" {
		// Resolved once now, so a missing key stops serve rather than
		// failing every plan step; each completion resolves it again, so
		// a rotated key is picked up.
		r, _, err := operatorSecret("--llm-api-key-ref", f.llmAPIKeyRef, parts.client.HTTPClient())
		if err != nil {
			return nil, err
		}
		opts.DefaultSecrets = r
	}
	detect, err := redact.ParseDetectors(f.redactDetect)
	if err != nil {
		return nil, fmt.Errorf("--redact-detect: %w", err)
	}
	pool := llm.NewClients(opts)
	// An external agent's attempt lasts as long as its run may: the
	// run's deadline, not a client time-out, ends it.
	agents := parts.client.HTTPClient()
	agents.Timeout = 0
	return workflow.New(workflow.Options{
		Store: st, Versions: catalogcache.Versions{VersionStore: st, Cache: catalog},
		Tools: catalogcache.Tools{ToolLookup: st, Cache: catalog}, Catalog: catalog,
		Caller: parts.executor, Models: models.lookup, LLM: pool,
		Lease: f.lease, Timeout: f.workflowTimeout, Logger: logger,
		DefaultToolCalls: f.defaultToolCalls, MaxToolCalls: f.maxToolCalls, MaxRunning: f.maxRunning,
		Redact: &redact.Service{Keys: st, Detect: detect}, Arms: arms,
		External: workflow.ExternalOptions{PublicURL: publicURL, HTTP: agents, Secrets: parts.resolver, Relay: pool,
			ApprovalHold: f.gatewayApprovalHold},
	}), nil
}

// operatorSecret resolves ref, the secret reference an operator gave in
// flag: it is outside the tenants' allow-list, so a resolver of its own
// allows it. The resolver is returned for later resolutions; the value is
// never logged.
func operatorSecret(flag, ref string, vault *http.Client) (*secrets.Resolver, string, error) {
	policy, err := secrets.NewPolicy([]string{ref}, true)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	r, err := secrets.NewResolver(secrets.Options{Policy: policy, VaultHTTPClient: vault})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := r.Resolve(ctx, "", ref)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	return r, v, nil
}

// replayMasks has replays compare calls and requests masked the way the
// runner masked the workflows they replay.
type replayMasks struct{ r *workflow.Runner }

func (m replayMasks) Masking(ctx context.Context, tenant string, tools []string) (replay.Masking, error) {
	mk, err := m.r.Masking(ctx, tenant, tools)
	if err != nil {
		return nil, err
	}
	return mk, nil
}
