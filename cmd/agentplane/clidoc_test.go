package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/cli.md from the commands' own help")

// cliReference renders every command's help, as cobra documents it, into
// one Markdown page.
func cliReference(t *testing.T) []byte {
	t.Helper()
	root := newRootCommand(func(string) string { return "" }, io.Discard, io.Discard)
	root.DisableAutoGenTag = true
	var buf bytes.Buffer
	buf.WriteString(`# Command-line reference

The ` + "`agentplane`" + ` binary is the server (` + "`serve`" + ` and the operator commands) and the
client of its API. This page is generated from the commands' own help
(` + "`go test ./cmd/agentplane -run TestCLIReference -update-docs`" + `), so it says what
` + "`agentplane <command> --help`" + ` says.

`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c != root {
			return
		}
		c.DisableAutoGenTag = true
		if err := doc.GenMarkdownCustom(c, &buf, func(name string) string {
			return "#" + strings.ReplaceAll(strings.TrimSuffix(name, ".md"), "_", "-")
		}); err != nil {
			t.Fatal(err)
		}
		buf.WriteString("\n")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return buf.Bytes()
}

// TestCLIReferenceIsCurrent fails when docs/cli.md no longer says what the
// commands' help says.
func TestCLIReferenceIsCurrent(t *testing.T) {
	got := cliReference(t)
	const path = "../../docs/cli.md"
	if *updateDocs {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: generate it with go test ./cmd/agentplane -run TestCLIReference -update-docs", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/cli.md is stale: regenerate it with go test ./cmd/agentplane -run TestCLIReference -update-docs")
	}
}
