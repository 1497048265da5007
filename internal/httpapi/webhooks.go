package httpapi

import (
	"net/http"
	"slices"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/webhook"
)

// webhookView is a webhook as the API shows it; Secret only in the
// answers of create and rotate-secret.
type webhookView struct {
	*webhook.Webhook
	Secret string `json:"secret,omitempty"`
}

func (s *Server) webhooks() (*webhook.Service, error) {
	if s.deps.Webhooks == nil {
		return nil, problem.New(problem.Unavailable, "webhooks are not enabled on this server")
	}
	return s.deps.Webhooks, nil
}

func (s *Server) handleCreateWebhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	var in webhook.Input
	if err := frontdoor.DecodeJSON(r, &in); err != nil {
		return err
	}
	wh, err := svc.Create(r.Context(), frontdoor.Principal(r).Tenant, in, s.record(r, http.StatusCreated))
	if err != nil {
		return err
	}
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, wh.ID
	w.Header().Set("Location", "/v1/webhooks/"+wh.ID)
	w.Header().Set("Cache-Control", "no-store")
	return frontdoor.WriteJSON(w, http.StatusCreated, webhookView{Webhook: wh, Secret: wh.Secret})
}

// tenantWebhooks are the caller's tenant's webhooks (the API's list and
// the console's page).
func (s *Server) tenantWebhooks(r *http.Request) ([]*webhook.Webhook, error) {
	svc, err := s.webhooks()
	if err != nil {
		return nil, err
	}
	return svc.Store.ListWebhooks(r.Context(), frontdoor.Principal(r).Tenant)
}

func (s *Server) handleListWebhooks(w http.ResponseWriter, r *http.Request) error {
	all, err := s.tenantWebhooks(r)
	if err != nil {
		return err
	}
	views := make([]webhookView, len(all))
	for i, wh := range all {
		views[i] = webhookView{Webhook: wh}
	}
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"webhooks": views})
}

func (s *Server) handleGetWebhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	wh, err := svc.Store.Webhook(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	return frontdoor.WriteJSON(w, http.StatusOK, webhookView{Webhook: wh})
}

func (s *Server) handleDeleteWebhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := svc.Store.DeleteWebhook(r.Context(), frontdoor.Principal(r).Tenant, id, s.record(r, http.StatusOK)); err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

func (s *Server) handleListDeliveries(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	status := q.Get("status")
	var errs []problem.FieldError
	if status != "" && !slices.Contains([]string{webhook.Pending, webhook.Delivered, webhook.Failed}, status) {
		errs = append(errs, problem.FieldError{Field: "status", Message: "must be pending, delivered or failed"})
	}
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		errs = append(errs, problem.As(err).Errors...)
	}
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	tenant, id := frontdoor.Principal(r).Tenant, r.PathValue("id")
	if _, err := svc.Store.Webhook(r.Context(), tenant, id); err != nil {
		return err
	}
	ds, err := svc.Store.Deliveries(r.Context(), tenant, id, status, limit)
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []*webhook.Delivery{}
	}
	return frontdoor.WriteJSON(w, http.StatusOK, map[string]any{"deliveries": ds})
}

func (s *Server) handleRetryDelivery(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	d, err := svc.Store.RetryDelivery(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), r.PathValue("dlv"),
		s.deps.Now(), s.record(r, http.StatusOK))
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	return frontdoor.WriteJSON(w, http.StatusOK, d)
}

func (s *Server) handleRotateSecret(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	wh, err := svc.Rotate(r.Context(), frontdoor.Principal(r).Tenant, r.PathValue("id"), s.record(r, http.StatusOK))
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).Audited = true
	w.Header().Set("Cache-Control", "no-store")
	return frontdoor.WriteJSON(w, http.StatusOK, webhookView{Webhook: wh, Secret: wh.Secret})
}
