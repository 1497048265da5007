// Command agentplane is both the agentplane server (agentplane serve) and its
// command-line client.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	startWithSmallStacks(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		os.Exit(report(err, os.Stderr))
	}
}

// report prints what went wrong on one line (a stream left with Ctrl-C has
// said so already), its control characters escaped as the server's words
// may hold an agent's (terminalText), and returns the exit code.
func report(err error, stderr io.Writer) int {
	code := exitCode(err)
	if code != exitDetached {
		fmt.Fprintln(terminal(stderr), "agentplane:", explain(err))
	}
	return code
}

// run is the whole program; tests call it to start a real server.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	root := newRootCommand(getenv, stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
