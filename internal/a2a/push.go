package a2a

import (
	"fmt"
	"net/http"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/webhook"
)

// An A2A task's push-notification configs are webhooks limited to its
// workflow (docs/a2a.md): the outbox queues their deliveries with the
// workflow's own writes, and the deliverer sends and signs them (Standard
// Webhooks, the config's token the secret) as any webhook's, with the
// body PushBody makes: the A2A StreamResponse of the event.

// pushEvents are the events a config receives: the task's end and its
// waits at approvals.
var pushEvents = []string{webhook.WorkflowCompleted, webhook.WorkflowFailed, webhook.WorkflowCancelled, webhook.WorkflowWaiting}

// PushBody is the body of a delivery to wh: for an A2A task's
// push-notification config (a webhook of one workflow) the StreamResponse
// {"task": Task} of the queued event, the task as the event saw it, by
// the mapping GetTask answers with, as application/a2a+json (A2A 1.0.1);
// for any other webhook the queued body.
func PushBody(wh *webhook.Webhook, body []byte) ([]byte, string, error) {
	if wh.WorkflowID == "" {
		return body, "", nil
	}
	ev, err := webhook.ReadWorkflowEvent(body)
	if err != nil {
		return nil, "", fmt.Errorf("push notification of task %s: %w", wh.WorkflowID, err)
	}
	t := taskOf(&ev.Workflow, ev.Reason, ev.At)
	b, err := frontdoor.Marshal(wire.StreamResponse{Task: &t})
	return b, MediaType, err
}

func (c *call) pushService() (*webhook.Service, error) {
	if c.s.d.Webhooks == nil {
		return nil, errPushNotSupported
	}
	return c.s.d.Webhooks, nil
}

func pushConfigOf(wh *webhook.Webhook) wire.TaskPushNotificationConfig {
	return wire.TaskPushNotificationConfig{ID: wh.ID, TaskID: wh.WorkflowID, URL: wh.URL}
}

// createPushConfig answers CreateTaskPushNotificationConfig. The token,
// when given, must be a Standard Webhooks secret: it signs the deliveries,
// so the receiver that chose it verifies them; without one a secret is
// made and answered as the token, this once.
func (c *call) createPushConfig(cfg wire.TaskPushNotificationConfig) (any, error) {
	svc, err := c.pushService()
	if err != nil {
		return nil, err
	}
	if cfg.Authentication != nil {
		return nil, problem.Field("authentication", "is not supported: deliveries are signed (Standard Webhooks) with the token; leave it out")
	}
	wf, err := c.task(cfg.TaskID)
	if err != nil {
		return nil, err
	}
	rec := c.s.d.Record(c.r, http.StatusOK)
	wh, err := svc.Create(c.r.Context(), wf.Tenant, webhook.Input{URL: cfg.URL, Events: pushEvents, Agent: c.agent,
		WorkflowID: wf.ID, Secret: cfg.Token, Description: "A2A push notifications of task " + wf.ID}, rec)
	if err != nil {
		return nil, err
	}
	frontdoor.InfoFrom(c.r.Context()).Audited = true
	c.w.Header().Set("Cache-Control", "no-store")
	out := pushConfigOf(wh)
	out.Token = wh.Secret
	return out, nil
}

// pushConfig is one config of a task.
func (c *call) pushConfig(taskID, id string) (*webhook.Webhook, *webhook.Service, error) {
	svc, err := c.pushService()
	if err != nil {
		return nil, nil, err
	}
	wf, err := c.task(taskID)
	if err != nil {
		return nil, nil, err
	}
	wh, err := svc.Store.Webhook(c.r.Context(), wf.Tenant, id)
	if err == nil && wh.WorkflowID != wf.ID {
		err = problem.New(problem.NotFound, "no push-notification config %s of task %s", id, wf.ID)
	}
	if problem.Is(err, problem.NotFound) {
		return nil, nil, problem.New(problem.NotFound, "no push-notification config %s of task %s", id, wf.ID)
	}
	return wh, svc, err
}

func (c *call) getPushConfig(req wire.PushConfigRequest) (any, error) {
	wh, _, err := c.pushConfig(req.TaskID, req.ID)
	if err != nil {
		return nil, err
	}
	return pushConfigOf(wh), nil
}

func (c *call) deletePushConfig(req wire.PushConfigRequest) (any, error) {
	wh, svc, err := c.pushConfig(req.TaskID, req.ID)
	if err != nil {
		return nil, err
	}
	if err := svc.Store.DeleteWebhook(c.r.Context(), wh.Tenant, wh.ID, c.s.d.Record(c.r, http.StatusOK)); err != nil {
		return nil, err
	}
	frontdoor.InfoFrom(c.r.Context()).Audited = true
	return struct{}{}, nil
}

// listPushConfigs answers ListTaskPushNotificationConfigs: every config
// of the task, on one page.
func (c *call) listPushConfigs(req wire.PushConfigRequest) (any, error) {
	svc, err := c.pushService()
	if err != nil {
		return nil, err
	}
	wf, err := c.task(req.TaskID)
	if err != nil {
		return nil, err
	}
	all, err := svc.Store.ListWebhooks(c.r.Context(), wf.Tenant)
	if err != nil {
		return nil, err
	}
	out := wire.ListPushConfigsResponse{Configs: []wire.TaskPushNotificationConfig{}}
	for _, wh := range all {
		if wh.WorkflowID == wf.ID {
			out.Configs = append(out.Configs, pushConfigOf(wh))
		}
	}
	return out, nil
}

// pushConfigsREST serves the HTTP+JSON push-notification routes.
func (s *Server) pushConfigsREST(w http.ResponseWriter, r *http.Request) error {
	c, err := s.restCall(w, r)
	if err != nil {
		return err
	}
	req := wire.PushConfigRequest{TaskID: r.PathValue("task"), ID: r.PathValue("config")}
	var res any
	switch {
	case r.Method == http.MethodPost:
		var cfg wire.TaskPushNotificationConfig
		if err := frontdoor.DecodeJSON(r, &cfg); err != nil {
			return err
		}
		if cfg.TaskID != "" && cfg.TaskID != req.TaskID {
			return problem.Field("taskId", "must be the task of the path, %s", req.TaskID)
		}
		cfg.TaskID = req.TaskID
		res, err = c.traced("CreateTaskPushNotificationConfig", taskRequestAttrs("", req.TaskID), func() (any, error) { return c.createPushConfig(cfg) })
	case r.Method == http.MethodDelete:
		res, err = c.traced("DeleteTaskPushNotificationConfig", taskRequestAttrs("", req.TaskID), func() (any, error) { return c.deletePushConfig(req) })
	case req.ID != "":
		res, err = c.traced("GetTaskPushNotificationConfig", taskRequestAttrs("", req.TaskID), func() (any, error) { return c.getPushConfig(req) })
	default:
		res, err = c.traced("ListTaskPushNotificationConfigs", taskRequestAttrs("", req.TaskID), func() (any, error) { return c.listPushConfigs(req) })
	}
	if err != nil {
		return err
	}
	return writeREST(w, res)
}
