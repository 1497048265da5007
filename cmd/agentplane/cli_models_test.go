package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestCLIModels drives the models commands against a real server process
// that allows one loopback model server with --allow-private-host.
func TestCLIModels(t *testing.T) {
	ollama := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(ollama.Close)
	u, _ := url.Parse(ollama.URL)
	t.Setenv("SERVER_LLM_KEY", "sk-server") // the planner of --llm-* resolves it at start
	data := t.TempDir()
	addr := freeAddr(t)
	srv := startChild(t, addr, "--data", data, "--allow-private-host", u.Host, "--secret-ref-allow", "env://MODEL_*",
		"--llm-base-url", "https://api.openai.com/v1", "--llm-model", "gpt-4o-mini", "--llm-api-key-ref", "env://SERVER_LLM_KEY")
	var tok bytes.Buffer
	if err := run(context.Background(), []string{"token", "--data", data, "--addr", addr, "--tenant", "acme", "--scope", "models:read models:write"},
		func(string) string { return "" }, &tok, io.Discard); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, url: srv.base, config: t.TempDir(), dir: t.TempDir(), token: strings.TrimSpace(tok.String())}

	out := e.ok("models", "register", "--name", "ollama", "--provider", "openai", "--base-url", ollama.URL+"/v1", "--model", "llama3.1",
		"--price-in", "0", "--price-out", "0", "--http2-prior-knowledge")
	for _, want := range []string{"name", "ollama", "llama3.1", "2m0s", "USD", "http2_prior_knowledge"} {
		if !strings.Contains(out, want) {
			t.Errorf("register printed no %q:\n%s", want, out)
		}
	}
	azure := e.write("azure.yaml", `name: gpt-small
provider: openai
base_url: https://contoso.openai.azure.com/openai/v1
model: gpt-4o-mini
auth: {type: api_key, secrets_ref: env://MODEL_AZURE_KEY, header: api-key}
timeout: 90s
price: {input_per_mtok: 0.15, output_per_mtok: 0.6}
`)
	e.ok("models", "register", "-f", azure)
	out = e.ok("models", "list")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "gpt-small") || !strings.Contains(out, "ollama") {
		t.Errorf("models list:\n%s", out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(e.ok("models", "get", "gpt-small", "-o", "json")), &m); err != nil || m["timeout"] != "1m30s" {
		t.Errorf("models get -o json: %v %v", err, m)
	}

	// update with flags keeps the rest of the registration.
	out = e.ok("models", "update", "gpt-small", "--model", "gpt-4o", "-o", "json")
	if err := json.Unmarshal([]byte(out), &m); err != nil || m["model"] != "gpt-4o" || m["revision"] != 2.0 ||
		m["auth"].(map[string]any)["header"] != "api-key" {
		t.Errorf("models update --model: %v\n%s", err, out)
	}
	out = e.ok("models", "update", "ollama", "--http2-prior-knowledge=false", "-o", "json")
	if err := json.Unmarshal([]byte(out), &m); err != nil || m["http2_prior_knowledge"] != nil || m["model"] != "llama3.1" {
		t.Errorf("models update --http2-prior-knowledge=false: %v\n%s", err, out)
	}
	e.ok("models", "update", "gpt-small", "-f", azure)
	if out := e.ok("models", "get", "gpt-small"); !strings.Contains(out, "gpt-4o-mini") || !strings.Contains(out, "3") {
		t.Errorf("after update -f:\n%s", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"another loopback port", []string{"models", "register", "--name", "vllm", "--provider", "openai", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"}, "127.0.0.1 is a loopback address"},
		{"a key outside the allow-list", []string{"models", "register", "--name", "x", "--provider", "openai", "--base-url", "https://api.openai.com/v1",
			"--model", "m", "--api-key-ref", "env://OPENAI_API_KEY"}, "secret"},
		{"the reserved name", []string{"models", "register", "--name", "default", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--model", "m"}, "reserved"},
	} {
		_, errs, code := e.run(tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want a failure saying %q", tc.name, code, errs, tc.want)
		}
	}

	if out := e.ok("models", "delete", "ollama"); out != "deleted ollama\n" {
		t.Errorf("delete printed %q", out)
	}
	if _, errs, code := e.run("models", "get", "ollama"); code == 0 || !strings.Contains(errs, "no model named") {
		t.Errorf("get after delete: exit %d %q", code, errs)
	}
}

// TestServeRefusesBadModelFlags: a bad --allow-private-host or server-wide
// model stops serve at once, naming the flag.
func TestServeRefusesBadModelFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow-private-host", "127.0.0.1:http"}, "--allow-private-host"},
		{[]string{"--allow-private-host", "0x7f.1"}, "--allow-private-host"},
		{[]string{"--llm-base-url", "https://llm.example/v1", "--llm-model", "m", "--llm-provider", "gemini"}, "provider"},
		{[]string{"--llm-base-url", "https://me:pw@llm.example/v1", "--llm-model", "m"}, "base_url"},
		{[]string{"--llm-model", "m"}, "--llm-base-url"},
		{[]string{"--llm-http2-prior-knowledge"}, "--llm-base-url"},
		{[]string{"--llm-base-url", "https://llm.example/v1", "--llm-model", "m", "--llm-http2-prior-knowledge"}, "http2_prior_knowledge"},
		{[]string{"--llm-base-url", "https://llm.example/v1", "--llm-model", "m", "--llm-api-key-ref", "env://AGENTPLANE_TEST_UNSET_KEY"}, "--llm-api-key-ref"},
	} {
		args := append([]string{"serve", "--data", t.TempDir(), "--addr", freeAddr(t)}, tc.args...)
		err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}
