package a2a

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/workflow"
)

// sendStreamingMessage answers SendStreamingMessage with the task's events.
func (c *call) sendStreamingMessage(req wire.SendMessageRequest) error {
	wf, release, err := c.send(req, true)
	if err != nil {
		return err
	}
	defer release()
	return c.stream(wf, 0)
}

// subscribe answers SubscribeToTask; Last-Event-ID resumes a stream.
func (c *call) subscribe(id string) error {
	wf, err := c.task(id)
	if err != nil {
		return err
	}
	after := 0
	if v := c.r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return problem.Field("Last-Event-ID", "must be an event id this stream sent")
		}
		after = n
	} else if wf.Done() {
		return UnsupportedOperation.New("task %s has ended (%s): read it with GetTask", id, stateOf(wf))
	}
	release, err := c.s.d.Stream(wf.Tenant)
	if err != nil {
		return err
	}
	defer release()
	return c.stream(wf, after)
}

// stream sends the task as it is, then a status update per workflow event
// after afterID (each step's, with the step in metadata), then the output
// artifact and the final status. Event ids are the workflow's own, so a
// client resumes with Last-Event-ID as on /v1/workflows/{id}/events.
func (c *call) stream(wf *workflow.Workflow, afterID int) error {
	sse, ctx := frontdoor.StartSSE(c.w, c.r, c.s.d.Draining)
	defer sse.Close()
	send := func(id int, v wire.StreamResponse) error {
		b, err := frontdoor.Marshal(c.event(v))
		if err != nil {
			return err
		}
		return sse.Send(id, b[:len(b)-1])
	}
	t, err := c.s.readTask(ctx, wf)
	if err != nil {
		return err
	}
	// The A2A server span of the stream names its task.
	trace.SpanFromContext(c.r.Context()).SetAttributes(taskAttrs(t)...)
	if err := send(afterID, wire.StreamResponse{Task: &t}); err != nil {
		return nil
	}
	for ev, err := range c.s.d.Runner.Follow(ctx, wf.Tenant, wf.ID, afterID) {
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("a2a stream of %s: %w", wf.ID, err)
		}
		var head struct {
			Event  string `json:"event"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Data, &head)
		now := c.s.d.Now().UTC().Format(time.RFC3339Nano)
		if head.Event != "complete" {
			u := wire.TaskStatusUpdateEvent{TaskID: wf.ID, ContextID: wf.ID, Status: wire.TaskStatus{State: wire.TaskStateWorking, Timestamp: now},
				Metadata: map[string]any{"step": ev.Data}}
			if head.Status == agent.StatusWaitingApproval {
				u.Status.State = wire.TaskStateInputRequired
				if head.Reason != "" {
					u.Status.Message = agentMessage(wf.ID, head.Reason)
				}
			}
			if err := send(ev.ID, wire.StreamResponse{StatusUpdate: &u}); err != nil {
				return nil
			}
			continue
		}
		end, err := c.s.d.Workflows.Workflow(ctx, wf.Tenant, wf.ID)
		if err != nil {
			return fmt.Errorf("a2a stream of %s: %w", wf.ID, err)
		}
		final := taskOf(end, "", c.s.d.Now())
		for _, a := range final.Artifacts {
			if err := send(ev.ID, wire.StreamResponse{ArtifactUpdate: &wire.TaskArtifactUpdateEvent{TaskID: wf.ID, ContextID: wf.ID, Artifact: a, LastChunk: true}}); err != nil {
				return nil
			}
		}
		u := wire.TaskStatusUpdateEvent{TaskID: wf.ID, ContextID: wf.ID, Status: final.Status, Metadata: final.Metadata}
		_ = send(ev.ID, wire.StreamResponse{StatusUpdate: &u})
		return nil
	}
	return nil
}
