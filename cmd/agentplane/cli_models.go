package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/internal/client"
)

func modelTable(w io.Writer, m map[string]any) error {
	vertical(w, m, "id", "name", "provider", "base_url", "model", "auth.type", "auth.secrets_ref", "auth.header",
		"timeout", "http2_prior_knowledge", "max_concurrency", "price.input_per_mtok", "price.output_per_mtok", "price.currency",
		"daily_token_budget", "revision", "updated_at")
	return nil
}

// modelFields are the flags of the common registration fields.
type modelFields struct {
	file, name, provider, baseURL, model, keyRef string
	priceIn, priceOut                            float64
	h2c                                          bool
}

func (f *modelFields) register(fs *pflag.FlagSet, withName bool) {
	fs.StringVarP(&f.file, "file", "f", "", "the registration, a YAML or JSON file (- for standard input); flags override its fields")
	if withName {
		fs.StringVar(&f.name, "name", "", "model name, ^[a-z0-9][a-z0-9._-]{0,62}$, which agents name")
	}
	fs.StringVar(&f.provider, "provider", "", "openai (Chat Completions: OpenAI, Azure OpenAI, Ollama, vLLM, LiteLLM) or anthropic (Messages)")
	fs.StringVar(&f.baseURL, "base-url", "", "the API root, such as https://api.openai.com/v1")
	fs.StringVar(&f.model, "model", "", "the provider's model id, such as gpt-4o-mini")
	fs.StringVar(&f.keyRef, "api-key-ref", "", "secret reference of the API key (env://, file://, vault://), sent as a bearer token; for another header, give auth in the file")
	fs.BoolVar(&f.h2c, "http2-prior-knowledge", false, "speak HTTP/2 without TLS (h2c) to an http:// base URL, so completions in flight share a few connections; the server must speak it (=false turns it off)")
	fs.Float64Var(&f.priceIn, "price-in", 0, "price of a million input tokens (USD unless the file says)")
	fs.Float64Var(&f.priceOut, "price-out", 0, "price of a million output tokens")
}

// body is the registration: the file's, with the flags given on top.
func (f *modelFields) body(cmd *cobra.Command) (map[string]any, error) {
	body := map[string]any{}
	if f.file != "" {
		raw, err := readDocument(f.file, cmd.InOrStdin())
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &body); err != nil || body == nil {
			return nil, usagef("%s is not a model registration object", f.file)
		}
	}
	for k, v := range map[string]string{"name": f.name, "provider": f.provider, "base_url": f.baseURL, "model": f.model} {
		if v != "" {
			body[k] = v
		}
	}
	if f.keyRef != "" {
		body["auth"] = map[string]any{"type": "bearer", "secrets_ref": f.keyRef}
	}
	flags := cmd.Flags()
	if flags.Changed("http2-prior-knowledge") {
		body["http2_prior_knowledge"] = f.h2c
	}
	if flags.Changed("price-in") || flags.Changed("price-out") {
		price, _ := body["price"].(map[string]any)
		if price == nil {
			price = map[string]any{"input_per_mtok": 0, "output_per_mtok": 0}
		}
		if flags.Changed("price-in") {
			price["input_per_mtok"] = f.priceIn
		}
		if flags.Changed("price-out") {
			price["output_per_mtok"] = f.priceOut
		}
		body["price"] = price
	}
	return body, nil
}

func (c *cli) modelsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "models", Short: "Register and inspect the LLM endpoints agents may use"}
	completeModel := c.complete("/v1/models?limit=200", "models", "name")

	var reg modelFields
	var key string
	register := &cobra.Command{
		Use:   "register",
		Short: "Register a model (from flags, or a registration file in YAML or JSON)",
		Long: `Registers an LLM endpoint the tenant's agents may name. The registration is the
body of POST /v1/models (docs/models.md): give it as a YAML or JSON file with -f,
or with flags; flags override the file's fields.`,
		Example: `  agentplane models register --name gpt-small --provider openai \
    --base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-ref env://OPENAI_API_KEY \
    --price-in 0.15 --price-out 0.6
  agentplane models register -f azure-gpt.yaml`,
		Args: args(0, "no arguments (the registration is -f FILE or flags)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := reg.body(cmd)
			if err != nil {
				return err
			}
			if body["name"] == nil {
				return usagef("a registration needs a name: --name, or -f FILE")
			}
			_, err = c.send(cmd, http.MethodPost, "/v1/models", body, idempotencyHeader(key), modelTable)
			return err
		},
	}
	reg.register(register.Flags(), true)
	register.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key of the request, to retry it safely")

	listCmd := &cobra.Command{
		Use: "list", Short: "List the tenant's models", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.get(cmd, "/v1/models"+query("limit", flagString(cmd, "limit"), "cursor", flagString(cmd, "cursor")), func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "models"), "NAME\tPROVIDER\tMODEL\tBASE URL\tREVISION", "name", "provider", "model", "base_url", "revision")
				return nil
			})
		},
	}
	pageFlags(listCmd)

	getCmd := &cobra.Command{
		Use: "get NAME", Short: "Show a model", Args: args(1, "a model name"), ValidArgsFunction: completeModel,
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.get(cmd, "/v1/models/"+url.PathEscape(a[0]), modelTable)
		},
	}

	var upd modelFields
	update := &cobra.Command{
		Use:   "update NAME",
		Short: "Replace a model's registration",
		Long: `Sends PUT /v1/models/{name}: the whole registration, from -f FILE, with the
flags overriding its fields. Without -f, the model's current registration is
sent again with the flags' changes.`,
		Args: args(1, "a model name"), ValidArgsFunction: completeModel,
		RunE: func(cmd *cobra.Command, a []string) error {
			path := "/v1/models/" + url.PathEscape(a[0])
			if upd.file == "" {
				cur, err := c.currentModel(cmd, path)
				if err != nil {
					return err
				}
				body, err := upd.body(cmd)
				if err != nil {
					return err
				}
				for k, v := range body {
					cur[k] = v
				}
				_, err = c.send(cmd, http.MethodPut, path, cur, nil, modelTable)
				return err
			}
			body, err := upd.body(cmd)
			if err != nil {
				return err
			}
			if body["name"] == nil {
				body["name"] = a[0]
			}
			_, err = c.send(cmd, http.MethodPut, path, body, nil, modelTable)
			return err
		},
	}
	upd.register(update.Flags(), false)

	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a model (refused while an agent version names it)", Args: args(1, "a model name"),
		ValidArgsFunction: completeModel,
		RunE: func(cmd *cobra.Command, a []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodDelete, Path: "/v1/models/" + url.PathEscape(a[0])}); err != nil {
				return err
			}
			if c.output == "json" || c.output == "yaml" {
				return c.show(fmt.Appendf(nil, `{"name": %q, "deleted": true}`, a[0]), nil)
			}
			fmt.Fprintf(c.stdout, "deleted %s\n", a[0])
			return nil
		},
	}

	cmd.AddCommand(register, listCmd, getCmd, update, del)
	return cmd
}

// currentModel is a model's registration as PUT takes it (the read-only
// fields dropped).
func (c *cli) currentModel(cmd *cobra.Command, path string) (map[string]any, error) {
	cl, err := c.client(cmd.Context())
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if _, err := cl.JSON(cmd.Context(), client.Request{Method: http.MethodGet, Path: path}, &m); err != nil {
		return nil, err
	}
	for _, k := range []string{"id", "revision", "created_at", "updated_at"} {
		delete(m, k)
	}
	return m, nil
}
