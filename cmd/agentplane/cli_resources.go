package main

import (
	"net/http"

	"github.com/spf13/cobra"
)

// addClientCommands adds the command-line client's commands to root.
func (c *cli) addClientCommands(root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: "client", Title: "Client commands (talk to a server over its API):"},
		&cobra.Group{ID: "operator", Title: "Operator commands (run on the server's machine):"})
	for _, cmd := range []*cobra.Command{c.loginCommand(), c.toolsCommand(), c.modelsCommand(), c.agentsCommand(), c.invokeCommand(),
		c.workflowsCommand(), c.usageCommand(), c.approvalsCommand(), c.replayCommand(), c.replaysCommand(), c.batchesCommand(), c.datasetsCommand(),
		c.operationsCommand(), c.auditCommand(), c.schedulesCommand(), c.webhooksCommand(), c.consoleCommand()} {
		cmd.GroupID = "client"
		root.AddCommand(cmd)
	}
}

func pageFlags(cmd *cobra.Command) {
	cmd.Flags().String("limit", "", "page size (1–200, default 50)")
	cmd.Flags().String("cursor", "", "next_cursor of the previous page")
}

func flagString(cmd *cobra.Command, name string) string {
	v, _ := cmd.Flags().GetString(name)
	return v
}

func idempotencyHeader(key string) http.Header {
	if key == "" {
		return nil
	}
	return http.Header{"Idempotency-Key": {key}}
}

// exitError ends the command with a code and a message, having printed its result.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }
func (e exitError) ExitCode() int { return e.code }
