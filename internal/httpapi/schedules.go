package httpapi

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/schedule"
	"github.com/agentplane/agentplane/internal/workflow"
)

// scheduleView is a schedule as the API shows it.
type scheduleView struct {
	*schedule.Schedule
	Creator creatorView `json:"creator"`
}

type creatorView struct {
	Sub      string   `json:"sub"`
	ClientID string   `json:"client_id,omitempty"`
	Scopes   []string `json:"scopes"`
}

func viewSchedule(s *schedule.Schedule) scheduleView {
	scopes := s.Creator.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return scheduleView{Schedule: s, Creator: creatorView{Sub: s.Creator.Sub, ClientID: s.Creator.ClientID, Scopes: scopes}}
}

func (s *Server) schedules() (*schedule.Service, error) {
	if s.deps.Schedules == nil {
		return nil, problem.New(problem.Unavailable, "schedules are not enabled on this server")
	}
	return s.deps.Schedules, nil
}

// scheduleOf is the schedule that started a workflow, "" when none did or
// schedules are off.
func (s *Server) scheduleOf(r *http.Request, workflowID string) (string, error) {
	if s.deps.Schedules == nil {
		return "", nil
	}
	return s.deps.Schedules.Store.ScheduleOf(r.Context(), workflowID)
}

func (s *Server) handleCreateSchedule(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.schedules()
	if err != nil {
		return err
	}
	var in schedule.Input
	if err := frontdoor.DecodeJSON(r, &in); err != nil {
		return err
	}
	p := frontdoor.Principal(r)
	creator := workflow.Caller{Sub: p.Subject, ClientID: p.ClientID, Tenant: p.Tenant, Scopes: p.Scopes}
	sch, err := svc.Create(r.Context(), p.Tenant, creator, in, s.record(r, http.StatusCreated))
	if err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, sch.ID
	w.Header().Set("Location", "/v1/schedules/"+sch.ID)
	return frontdoor.WriteJSON(w, http.StatusCreated, viewSchedule(sch))
}

// tenantSchedules are the caller's tenant's schedules (the API's list and
// the console's page).
func (s *Server) tenantSchedules(r *http.Request) ([]*schedule.Schedule, error) {
	svc, err := s.schedules()
	if err != nil {
		return nil, err
	}
	return svc.List(r.Context(), frontdoor.Principal(r).Tenant)
}

func (s *Server) handleListSchedules(w http.ResponseWriter, r *http.Request) error {
	all, err := s.tenantSchedules(r)
	if err != nil {
		return err
	}
	views := make([]scheduleView, len(all))
	for i, sch := range all {
		views[i] = viewSchedule(sch)
	}
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"schedules": views})
}

func (s *Server) handleGetSchedule(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.schedules()
	if err != nil {
		return err
	}
	sch, err := svc.Get(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, viewSchedule(sch))
}

func (s *Server) handleUpdateSchedule(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.schedules()
	if err != nil {
		return err
	}
	var in schedule.Input
	if err := frontdoor.DecodeJSON(r, &in); err != nil {
		return err
	}
	sch, err := svc.Update(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), in, s.record(r, http.StatusOK))
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusOK, viewSchedule(sch))
}

func (s *Server) handleDeleteSchedule(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.schedules()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := svc.Store.DeleteSchedule(r.Context(), frontdoor.Principal(r).Tenant, id, s.record(r, http.StatusOK)); err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

func (s *Server) handlePauseSchedule(paused bool) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		svc, err := s.schedules()
		if err != nil {
			return err
		}
		sch, err := svc.SetPaused(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), paused, s.record(r, http.StatusOK))
		if err != nil {
			return err
		}
		frontdoor.InfoFrom(r.Context()).Audited = true
		return frontdoor.WriteJSON(w, http.StatusOK, viewSchedule(sch))
	}
}

// handleTriggerSchedule starts the schedule's workflow now, as the
// schedule's creator, and answers 202 with it running.
func (s *Server) handleTriggerSchedule(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.schedules()
	if err != nil {
		return err
	}
	wf, err := svc.Trigger(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.WorkflowID = wf.ID
	info.Details = map[string]any{"workflow_id": wf.ID}
	w.Header().Set("Location", "/v1/workflows/"+wf.ID)
	v, err := s.workflowView(r, wf, nil, true, true)
	if err != nil {
		return err
	}
	v.ScheduleID = wf.ScheduleID
	return frontdoor.WriteJSON(w, http.StatusAccepted, v)
}
