package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/agentplane/agentplane/internal/client"
	"github.com/agentplane/agentplane/internal/problem"
)

// Exit codes of the command-line client.
const (
	exitOther    = 1 // any other failure
	exitUsage    = 2 // bad flags or arguments
	exitNotFound = 3 // the server answered 404
	exitAuth     = 4 // the server answered 401 or 403
	// exitChanged is replay --batch --fail-on-change finding a changed
	// outcome, or a batch whose checks' verdict is failed.
	exitChanged = 5
	// exitWorkflow is an invoke whose workflow ended failed, denied,
	// limit_exceeded, timed_out or cancelled.
	exitWorkflow = 6
)

// usageError is a mistake on the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// explain adds how to fix what the client can tell about an error.
func explain(err error) error {
	var p *client.Problem
	if errors.As(err, &p) && p.Status == http.StatusUnauthorized && strings.HasPrefix(p.Detail, "no bearer token") {
		p.Detail += " (run agentplane login, or set AGENTPLANE_TOKEN)"
	}
	return err
}

// exitCode is the process's exit code for an error run returned.
func exitCode(err error) int {
	var p *client.Problem
	var u usageError
	switch {
	case errors.As(err, &u):
		return exitUsage
	case problem.Is(err, problem.NotFound):
		// An operator command's store lookup (clients revoke).
		return exitNotFound
	case errors.As(err, &p):
		switch p.Status {
		case http.StatusNotFound:
			return exitNotFound
		case http.StatusUnauthorized, http.StatusForbidden:
			return exitAuth
		}
	case strings.HasPrefix(err.Error(), "unknown command"), strings.HasPrefix(err.Error(), "unknown flag"),
		strings.HasPrefix(err.Error(), "unknown shorthand flag"):
		return exitUsage
	}
	var c interface{ ExitCode() int }
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return exitOther
}

// cli holds the client's global flags and what they resolve to.
type cli struct {
	getenv         func(string) string
	stdout, stderr io.Writer
	url, token     string
	configPath     string
	output         string
}

// config is the client's configuration file, written by login.
type config struct {
	URL   string `yaml:"url,omitempty"`
	Token string `yaml:"token,omitempty"`
	// ClientID and ClientSecret let the client fetch a new token when the
	// stored one expires (client-credentials login).
	ClientID     string    `yaml:"client_id,omitempty"`
	ClientSecret string    `yaml:"client_secret,omitempty"`
	Scope        string    `yaml:"scope,omitempty"`
	Expires      time.Time `yaml:"expires,omitempty"`
}

func (c *cli) register(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&c.url, "url", "", "server URL (default http://127.0.0.1:8080) [$AGENTPLANE_URL]")
	pf.StringVar(&c.token, "token", "", "bearer access token [$AGENTPLANE_TOKEN]")
	pf.StringVar(&c.configPath, "config", "", "client configuration file written by login (default $XDG_CONFIG_HOME/agentplane/config.yaml)")
	pf.StringVarP(&c.output, "output", "o", "table", "output format of the client's commands: table, json or yaml")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
}

// defaultConfigPath is $XDG_CONFIG_HOME/agentplane/config.yaml, or under
// ~/.config when XDG_CONFIG_HOME is unset.
func (c *cli) defaultConfigPath() string {
	if c.configPath != "" {
		return c.configPath
	}
	dir := c.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(".agentplane", "config.yaml")
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "agentplane", "config.yaml")
}

func (c *cli) loadConfig() (config, error) {
	var cfg config
	raw, err := os.ReadFile(c.defaultConfigPath())
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w (fix it or run agentplane login again)", c.defaultConfigPath(), err)
	}
	return cfg, nil
}

func (c *cli) saveConfig(cfg config) (string, error) {
	path := c.defaultConfigPath()
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	// The file holds a token and perhaps a client secret: owner only.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// client resolves the server and token: flags, then AGENTPLANE_URL and
// AGENTPLANE_TOKEN, then the configuration file. A stored client-credentials
// login gets a new token when the stored one has expired.
func (c *cli) client(ctx context.Context) (*client.Client, error) {
	switch c.output {
	case "table", "json", "yaml":
	default:
		return nil, usagef("-o %q: use table, json or yaml", c.output)
	}
	cfg, err := c.loadConfig()
	if err != nil {
		return nil, err
	}
	cl := &client.Client{BaseURL: first(c.url, c.getenv("AGENTPLANE_URL"), cfg.URL, "http://127.0.0.1:8080"),
		Token: first(c.token, c.getenv("AGENTPLANE_TOKEN")), UserAgent: "agentplane-cli/" + version}
	from := "AGENTPLANE_TOKEN"
	if c.token != "" {
		from = "--token"
	}
	if err := headerSafe(cl.Token, from); err != nil {
		return nil, err
	}
	if cl.Token == "" && cfg.Token != "" && (first(c.url, c.getenv("AGENTPLANE_URL")) == "" || first(c.url, c.getenv("AGENTPLANE_URL")) == cfg.URL) {
		cl.Token = cfg.Token
		if cfg.ClientID != "" && !cfg.Expires.IsZero() && time.Until(cfg.Expires) < 30*time.Second {
			tok, exp, err := cl.ClientCredentials(ctx, cfg.ClientID, cfg.ClientSecret, cfg.Scope)
			if err != nil {
				return nil, fmt.Errorf("renew the token of %s: %w", c.defaultConfigPath(), err)
			}
			cfg.Token, cfg.Expires, cl.Token = tok, exp, tok
			if _, err := c.saveConfig(cfg); err != nil {
				return nil, err
			}
		}
	}
	return cl, nil
}

// headerSafe refuses a token that an Authorization header cannot carry
// (a space, a line break or another control character: two tokens, or a
// line of a terminal, pasted at once), which net/http would refuse to
// send with an error that reads as if the server were down.
func headerSafe(token, from string) error {
	for i := 0; i < len(token); i++ {
		if b := token[i]; b <= ' ' || b == 0x7f {
			return usagef("the token in %s has a space or control character at byte %d (%q): set it to the token alone", from, i+1, rune(b))
		}
	}
	return nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// show prints a read's answer: the API's own JSON for -o json, the same
// as YAML for -o yaml, and table(doc) otherwise, its control characters
// escaped (terminalText).
func (c *cli) show(body []byte, table func(w io.Writer, doc map[string]any) error) error {
	switch c.output {
	case "json":
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			_, err = c.stdout.Write(body)
			return err
		}
		buf.WriteByte('\n')
		_, err := c.stdout.Write(buf.Bytes())
		return err
	case "yaml":
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return fmt.Errorf("the server's answer is not JSON: %w", err)
		}
		return writeYAML(c.stdout, v)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("the server's answer is not a JSON object: %w", err)
	}
	tw := tabwriter.NewWriter(c.stdout, 2, 4, 2, ' ', 0)
	if err := table(terminal(tw), doc); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c.nextPage(doc) // after the table, which the tab writer holds until now
	return nil
}

// writeYAML writes v as one YAML document indented by two spaces.
func writeYAML(w io.Writer, v any) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

// get reads path and shows it.
func (c *cli) get(cmd *cobra.Command, path string, table func(w io.Writer, doc map[string]any) error) error {
	cl, err := c.client(cmd.Context())
	if err != nil {
		return err
	}
	resp, err := cl.Do(cmd.Context(), client.Request{Method: http.MethodGet, Path: path})
	if err != nil {
		return err
	}
	return c.show(resp.Body, table)
}

// send makes a write and shows its answer.
func (c *cli) send(cmd *cobra.Command, method, path string, body any, header http.Header, table func(w io.Writer, doc map[string]any) error) (*client.Response, error) {
	cl, err := c.client(cmd.Context())
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(cmd.Context(), client.Request{Method: method, Path: path, Body: body, Header: header})
	if err != nil {
		return nil, err
	}
	return resp, c.show(resp.Body, table)
}

// field reads a dotted path of a decoded document as text ("" when absent).
func field(doc map[string]any, path string) string {
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return fmt.Sprint(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// list returns the objects of an array field of a decoded document.
func list(doc map[string]any, key string) []map[string]any {
	arr, _ := doc[key].([]any)
	out := make([]map[string]any, 0, len(arr))
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// vertical writes chosen fields of doc as "name  value" lines.
func vertical(w io.Writer, doc map[string]any, fields ...string) {
	for _, f := range fields {
		if v := field(doc, f); v != "" {
			fmt.Fprintf(w, "%s:\t%s\n", f, v)
		}
	}
}

// rows writes a header and one line per object.
func rows(w io.Writer, items []map[string]any, header string, fields ...string) {
	fmt.Fprintln(w, header)
	for _, it := range items {
		vals := make([]string, len(fields))
		for i, f := range fields {
			vals[i] = field(it, f)
			if vals[i] == "" {
				vals[i] = "-"
			}
		}
		fmt.Fprintln(w, strings.Join(vals, "\t"))
	}
}

// nextPage says how to get the next page of a list, on stderr; show says
// it after every table.
func (c *cli) nextPage(doc map[string]any) {
	if cur := field(doc, "next_cursor"); cur != "" {
		fmt.Fprintf(c.stderr, "more: add --cursor %s\n", cur)
	}
}

// query builds a query string of the non-empty values.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// readDocument reads a YAML or JSON file (- for standard input) as JSON.
func readDocument(path string, stdin io.Reader) (json.RawMessage, error) {
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(io.LimitReader(stdin, 16<<20))
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageError{err}
	}
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, usagef("%s is neither YAML nor JSON: %v%s", path, err, yamlContext(raw, err))
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, usagef("%s: %v", path, err)
	}
	return out, nil
}

// yamlLine is the line a YAML error names.
var yamlLine = regexp.MustCompile(`\bline (\d+):`)

// yamlContext quotes the lines around the one a YAML error names: the
// parser names where it noticed the mistake, which may be the line before
// or after the one to fix.
func yamlContext(raw []byte, err error) string {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(raw), "\n")
	var b strings.Builder
	for i := max(n-1, 1); i <= min(n+1, len(lines)); i++ {
		fmt.Fprintf(&b, "; line %d: %q", i, strings.TrimRight(lines[i-1], "\r"))
	}
	return b.String()
}

// args checks the count of positional arguments with a usage error.
func args(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) != n {
			return usagef("%s takes %s (see %s --help)", strings.TrimPrefix(cmd.CommandPath(), "agentplane "), names, cmd.CommandPath())
		}
		return nil
	}
}

// complete offers names from a list endpoint for shell completion.
func (c *cli) complete(path, key, fieldName string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, a []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(a) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
		defer cancel()
		cl, err := c.client(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		resp, err := cl.Do(ctx, client.Request{Method: http.MethodGet, Path: path})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var doc map[string]any
		if json.Unmarshal(resp.Body, &doc) != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, it := range list(doc, key) {
			if v := field(it, fieldName); strings.HasPrefix(v, prefix) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
