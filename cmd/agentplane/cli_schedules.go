package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

// scheduleTable shows one schedule.
func scheduleTable(w io.Writer, doc map[string]any) error {
	vertical(w, doc, "id", "agent", "cron", "timezone", "overlap", "paused", "goal", "max_tool_calls",
		"paused_reason", "creator.sub", "creator.client_id", "creator.scopes", "last_due_at", "last_skip.due_at", "last_skip.reason",
		"next_due_at", "created_at", "updated_at")
	return nil
}

func (c *cli) schedulesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "schedules", Short: "Invoke agents on a timetable"}
	completeSchedule := c.complete("/v1/schedules", "schedules", "id")

	var in struct {
		agent, cron, timezone, goal, context, overlap string
		maxToolCalls                                  int
		paused                                        bool
	}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a schedule that invokes an agent as you",
		Long: `Creates a schedule. Its workflows run with your identity and the scopes of the
token used now. --cron takes five fields (minute hour day-of-month month
day-of-week), a descriptor such as @daily, or "@every <duration>" of at least 1m;
the fields are read in --timezone (IANA, default UTC). With --overlap skip (the
default) a due time starts nothing while the previous run is running or waiting.`,
		Example: `  agentplane schedules create --agent triage --cron "0 9 * * 1-5" --timezone Europe/Paris \
    --goal "Sweep the overnight queue" --context '{"queue": "billing"}'`,
		Args: args(0, "no arguments: the schedule is given by flags"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := map[string]any{"agent": in.agent, "cron": in.cron, "goal": in.goal, "paused": in.paused}
			for k, v := range map[string]string{"timezone": in.timezone, "overlap": in.overlap} {
				if v != "" {
					body[k] = v
				}
			}
			if in.maxToolCalls > 0 {
				body["max_tool_calls"] = in.maxToolCalls
			}
			if in.context != "" {
				var ctx map[string]any
				if err := json.Unmarshal([]byte(in.context), &ctx); err != nil {
					return usagef("--context is not a JSON object: %v", err)
				}
				body["context"] = ctx
			}
			_, err := c.send(cmd, http.MethodPost, "/v1/schedules", body, nil, scheduleTable)
			return err
		},
	}
	create.Flags().StringVar(&in.agent, "agent", "", "the agent, or name@version to pin one (required)")
	create.Flags().StringVar(&in.cron, "cron", "", `five cron fields, @daily and the like, or "@every 30m" (required)`)
	create.Flags().StringVar(&in.timezone, "timezone", "", "IANA time zone of the cron fields (default UTC)")
	create.Flags().StringVar(&in.goal, "goal", "", "the goal of each invocation (required)")
	create.Flags().StringVar(&in.context, "context", "", "the context of each invocation, a JSON object")
	create.Flags().StringVar(&in.overlap, "overlap", "", "skip (default) or allow a run while the previous one goes on")
	create.Flags().IntVar(&in.maxToolCalls, "max-tool-calls", 0, "bound on each run's tool calls (default the server's)")
	create.Flags().BoolVar(&in.paused, "paused", false, "create it paused")

	listCmd := &cobra.Command{
		Use: "list", Short: "List the tenant's schedules", Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.get(cmd, "/v1/schedules", func(w io.Writer, doc map[string]any) error {
				rows(w, list(doc, "schedules"), "ID\tAGENT\tCRON\tTIMEZONE\tPAUSED\tNEXT_DUE\tCREATOR",
					"id", "agent", "cron", "timezone", "paused", "next_due_at", "creator.sub")
				return nil
			})
		},
	}
	getCmd := &cobra.Command{
		Use: "get SCHEDULE", Short: "Show a schedule", Args: args(1, "a schedule id"), ValidArgsFunction: completeSchedule,
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.get(cmd, "/v1/schedules/"+url.PathEscape(a[0]), scheduleTable)
		},
	}
	post := func(verb, short string) *cobra.Command {
		return &cobra.Command{
			Use: verb + " SCHEDULE", Short: short, Args: args(1, "a schedule id"), ValidArgsFunction: completeSchedule,
			RunE: func(cmd *cobra.Command, a []string) error {
				_, err := c.send(cmd, http.MethodPost, "/v1/schedules/"+url.PathEscape(a[0])+"/"+verb, nil, nil, scheduleTable)
				return err
			},
		}
	}
	trigger := &cobra.Command{
		Use: "trigger SCHEDULE", Short: "Run a schedule's agent now, as the schedule's creator",
		Args: args(1, "a schedule id"), ValidArgsFunction: completeSchedule,
		RunE: func(cmd *cobra.Command, a []string) error {
			_, err := c.send(cmd, http.MethodPost, "/v1/schedules/"+url.PathEscape(a[0])+"/trigger", nil, nil, func(w io.Writer, doc map[string]any) error {
				fmt.Fprintf(w, "started workflow %s (%s)\n", field(doc, "workflow_id"), field(doc, "status"))
				fmt.Fprintf(c.stderr, "follow it with: agentplane workflows get %s\n", field(doc, "workflow_id"))
				return nil
			})
			return err
		},
	}
	del := &cobra.Command{
		Use: "delete SCHEDULE", Short: "Delete a schedule (its workflows stay)", Args: args(1, "a schedule id"), ValidArgsFunction: completeSchedule,
		RunE: func(cmd *cobra.Command, a []string) error {
			_, err := c.send(cmd, http.MethodDelete, "/v1/schedules/"+url.PathEscape(a[0]), nil, nil, func(w io.Writer, doc map[string]any) error {
				fmt.Fprintf(w, "deleted %s\n", field(doc, "id"))
				return nil
			})
			return err
		},
	}
	cmd.AddCommand(create, listCmd, getCmd, post("pause", "Pause a schedule: no due time runs until it is resumed"),
		post("resume", "Resume a schedule from its next due time"), trigger, del)
	return cmd
}
