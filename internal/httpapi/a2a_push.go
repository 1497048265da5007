package httpapi

import (
	"fmt"
	"net/http"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/webhook"
)

// An A2A task's push-notification configs are webhooks limited to its
// workflow (docs/a2a.md): the outbox queues their deliveries with the
// workflow's own writes, and the deliverer sends and signs them (Standard
// Webhooks, the config's token the secret) as any webhook's, with the
// body A2APushBody makes: the A2A StreamResponse of the event.

// a2aPushConfig is a TaskPushNotificationConfig.
type a2aPushConfig struct {
	Tenant         string          `json:"tenant,omitempty"`
	ID             string          `json:"id,omitempty"`
	TaskID         string          `json:"taskId"`
	URL            string          `json:"url"`
	Token          string          `json:"token,omitempty"`
	Authentication *map[string]any `json:"authentication,omitempty"`
}

// a2aPushRequest names one config of a task (Get, Delete) or the task's
// configs (List).
type a2aPushRequest struct {
	Tenant    string `json:"tenant,omitempty"`
	TaskID    string `json:"taskId"`
	ID        string `json:"id,omitempty"`
	PageSize  *int32 `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
}

// a2aPushEvents are the events a config receives: the task's end and its
// waits at approvals.
var a2aPushEvents = []string{webhook.WorkflowCompleted, webhook.WorkflowFailed, webhook.WorkflowCancelled, webhook.WorkflowWaiting}

// A2APushBody is the body of a delivery to wh: for an A2A task's
// push-notification config (a webhook of one workflow) the StreamResponse
// {"task": Task} of the queued event, the task as the event saw it, by
// the mapping GetTask answers with; for any other webhook the queued body.
func A2APushBody(wh *webhook.Webhook, body []byte) ([]byte, error) {
	if wh.WorkflowID == "" {
		return body, nil
	}
	ev, err := webhook.ReadWorkflowEvent(body)
	if err != nil {
		return nil, fmt.Errorf("push notification of task %s: %w", wh.WorkflowID, err)
	}
	t := a2aTaskOf(&ev.Workflow, ev.Reason, ev.At)
	return frontdoor.Marshal(a2aStreamResponse{Task: &t})
}

func (c *a2aCall) pushService() (*webhook.Service, error) {
	if c.s.deps.Webhooks == nil {
		return nil, errPushNotSupported
	}
	return c.s.deps.Webhooks, nil
}

func pushConfigOf(wh *webhook.Webhook) a2aPushConfig {
	return a2aPushConfig{ID: wh.ID, TaskID: wh.WorkflowID, URL: wh.URL}
}

// createPushConfig answers CreateTaskPushNotificationConfig. The token,
// when given, must be a Standard Webhooks secret: it signs the deliveries,
// so the receiver that chose it verifies them; without one a secret is
// made and answered as the token, this once.
func (c *a2aCall) createPushConfig(cfg a2aPushConfig) (any, error) {
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
	rec := c.s.record(c.r, http.StatusOK)
	wh, err := svc.Create(c.r.Context(), wf.Tenant, webhook.Input{URL: cfg.URL, Events: a2aPushEvents, Agent: c.agent,
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
func (c *a2aCall) pushConfig(taskID, id string) (*webhook.Webhook, *webhook.Service, error) {
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

func (c *a2aCall) getPushConfig(req a2aPushRequest) (any, error) {
	wh, _, err := c.pushConfig(req.TaskID, req.ID)
	if err != nil {
		return nil, err
	}
	return pushConfigOf(wh), nil
}

func (c *a2aCall) deletePushConfig(req a2aPushRequest) (any, error) {
	wh, svc, err := c.pushConfig(req.TaskID, req.ID)
	if err != nil {
		return nil, err
	}
	if err := svc.Store.DeleteWebhook(c.r.Context(), wh.Tenant, wh.ID, c.s.record(c.r, http.StatusOK)); err != nil {
		return nil, err
	}
	frontdoor.InfoFrom(c.r.Context()).Audited = true
	return struct{}{}, nil
}

// listPushConfigs answers ListTaskPushNotificationConfigs: every config
// of the task, on one page.
func (c *a2aCall) listPushConfigs(req a2aPushRequest) (any, error) {
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
	out := struct {
		Configs       []a2aPushConfig `json:"configs"`
		NextPageToken string          `json:"nextPageToken"`
	}{Configs: []a2aPushConfig{}}
	for _, wh := range all {
		if wh.WorkflowID == wf.ID {
			out.Configs = append(out.Configs, pushConfigOf(wh))
		}
	}
	return out, nil
}

// handleA2APushConfigs serves the HTTP+JSON push-notification routes.
func (s *Server) handleA2APushConfigs(w http.ResponseWriter, r *http.Request) error {
	c, err := s.restCall(w, r)
	if err != nil {
		return err
	}
	req := a2aPushRequest{TaskID: r.PathValue("task"), ID: r.PathValue("config")}
	var res any
	switch {
	case r.Method == http.MethodPost:
		var cfg a2aPushConfig
		if err := frontdoor.DecodeJSON(r, &cfg); err != nil {
			return err
		}
		if cfg.TaskID != "" && cfg.TaskID != req.TaskID {
			return problem.Field("taskId", "must be the task of the path, %s", req.TaskID)
		}
		cfg.TaskID = req.TaskID
		res, err = c.createPushConfig(cfg)
	case r.Method == http.MethodDelete:
		res, err = c.deletePushConfig(req)
	case req.ID != "":
		res, err = c.getPushConfig(req)
	default:
		res, err = c.listPushConfigs(req)
	}
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, res)
}
