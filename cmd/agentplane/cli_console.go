package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
)

func (c *cli) consoleCommand() *cobra.Command {
	var page string
	var noOpen bool
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Open the web console, signed in as this client's token",
		Long: `Asks the server for a one-time sign-in link to its web console (/console/) and
opens it in a browser. The link works once, within 60 seconds, and makes a
browser session with the identity, tenant and scopes of the token this client
uses; the session ends when that token expires (at most 12 hours).

The link is printed too, for a browser on another machine; where no browser
can be opened (no xdg-open, or --no-open) it is only printed.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var body any
			if page != "" {
				if !strings.HasPrefix(page, "/") {
					page = "/console/" + page
				}
				body = map[string]any{"next": page}
			}
			var link string
			_, err := c.send(cmd, http.MethodPost, "/v1/console/links", body, nil, func(w io.Writer, doc map[string]any) error {
				link = field(doc, "url")
				_, err := fmt.Fprintf(w, "Sign in to the console (the link works once, within 60 seconds):\n  %s\n", link)
				return err
			})
			if err != nil || noOpen || link == "" {
				return err
			}
			if opened := openBrowser(link); opened != "" {
				fmt.Fprintf(c.stderr, "opened with %s\n", opened)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&page, "page", "", "the console page to open, e.g. approvals or /console/workflows?status=running")
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "only print the link")
	return cmd
}

// openBrowser starts the desktop's opener on link without waiting for it,
// and names it; "" when there is none. It never fails the command.
func openBrowser(link string) string {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	cmd := exec.Command(path, link)
	if err := cmd.Start(); err != nil {
		return ""
	}
	go cmd.Wait() // reap it whenever it ends
	return name
}
