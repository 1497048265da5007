package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix prefixes the environment variable of every flag:
// --database-url reads AGENTPLANE_DATABASE_URL.
const envPrefix = "AGENTPLANE_"

func newRootCommand(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "agentplane",
		Short: "Agent orchestration: register APIs as tools, run agents, replay their workflows",
		Long: `agentplane runs agents against the APIs you register as tools, records every
step of every workflow, and replays past workflows against new agent versions.

The same binary is the server (agentplane serve) and its command-line client.
Every flag of the operator commands can also be set with an AGENTPLANE_*
environment variable, e.g. --database-url as AGENTPLANE_DATABASE_URL; the
client reads AGENTPLANE_URL and AGENTPLANE_TOKEN, then its configuration file
(agentplane login).

Much of what the client prints is third-party text: a model's answers, a
tool's results, an external agent's words. Tables, stream lines and errors
print its control characters as escapes (\x1b, \r, \u009b), so it cannot
act on the terminal; -o json and -o yaml keep it as the API sent it.

Exit codes: 0 success, 1 failure, 2 usage error, 3 not found, 4 not
authenticated or missing a scope, 5 replay --batch --fail-on-change found a
changed outcome, 6 an invoked workflow ended failed, denied, limit_exceeded,
timed_out or cancelled, 130 a stream left with Ctrl-C (the workflow goes on).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr}
	c.register(root)
	c.addClientCommands(root)
	for _, cmd := range []*cobra.Command{
		newServeCommand(getenv, stdout, stderr),
		newTokenCommand(getenv, stdout),
		newClientsCommand(getenv, stdout),
		newKeysCommand(getenv, stdout),
	} {
		cmd.GroupID = "operator"
		root.AddCommand(cmd)
	}
	root.SetHelpCommandGroupID("client")
	root.SetCompletionCommandGroupID("client")
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group (a command with
// subcommands and nothing to run of its own) print its help when called
// alone, and refuse an unknown subcommand as a usage error naming the
// closest ones, where cobra would print the help and exit 0.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if cmd == cmd.Root() || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		s := cmd.SuggestionsFor(args[0])
		if len(s) == 0 {
			// A command of that name elsewhere: tools search is
			// operations search.
			s = commandsNamed(cmd.Root(), args[0])
		}
		if len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usagef("%s (see %s --help)", msg, cmd.CommandPath())
	}
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv fills every flag the command line did not set from its
// environment variable, and says so in the flag's help.
func bindEnv(cmd *cobra.Command, getenv func(string) string) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		f.Usage += fmt.Sprintf(" [$%s]", envName(f.Name))
	})
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		var err error
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if err != nil || f.Changed || f.Name == "help" {
				return
			}
			v := getenv(envName(f.Name))
			if v == "" {
				return
			}
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				err = sv.Replace(strings.Split(v, ","))
			} else {
				err = f.Value.Set(v)
			}
			if err != nil {
				err = fmt.Errorf("$%s: %w", envName(f.Name), err)
			}
		})
		if err != nil || prev == nil {
			return err
		}
		return prev(c, args)
	}
}

// commandsNamed are the full paths of the commands named name, anywhere
// under cmd.
func commandsNamed(cmd *cobra.Command, name string) []string {
	var out []string
	for _, sub := range cmd.Commands() {
		if sub.Name() == name {
			out = append(out, sub.CommandPath())
		}
		out = append(out, commandsNamed(sub, name)...)
	}
	return out
}
