package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/page"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/replay"
)

// datasetRequest is the body of POST /v1/datasets and PUT /v1/datasets/{name}.
type datasetRequest struct {
	Name         string                        `json:"name"`
	Description  string                        `json:"description,omitempty"`
	Workflows    *batchSelection               `json:"workflows,omitempty"`
	WorkflowIDs  []string                      `json:"workflow_ids,omitempty"`
	Expectations map[string]replay.Expectation `json:"expectations,omitempty"`
}

// datasetView is a dataset as the API shows it.
type datasetView struct {
	*replay.Dataset
	Ref       string `json:"ref"`
	CreatedAt string `json:"created_at"`
}

func viewDataset(d *replay.Dataset) datasetView {
	return datasetView{Dataset: d, Ref: d.Ref(), CreatedAt: d.CreatedAt.UTC().Format(timeFormat)}
}

func (s *Server) handleCreateDataset(w http.ResponseWriter, r *http.Request) error {
	return s.saveDataset(w, r, "")
}

func (s *Server) handleUpdateDataset(w http.ResponseWriter, r *http.Request) error {
	return s.saveDataset(w, r, r.PathValue("name"))
}

// saveDataset makes version 1 of a dataset (name "") or the next version
// of the named one.
func (s *Server) saveDataset(w http.ResponseWriter, r *http.Request, name string) error {
	var req datasetRequest
	if err := frontdoor.DecodeJSON(r, &req); err != nil {
		return err
	}
	if name != "" {
		if req.Name != "" && req.Name != name {
			return problem.Field("name", "is %q but the path names %q: leave it out or make them equal", req.Name, name)
		}
		req.Name = name
	}
	sel, errs := selectionOf(req.Workflows, req.WorkflowIDs, false)
	if len(errs) > 0 {
		return problem.Validation(errs...)
	}
	var filter json.RawMessage
	if req.Workflows != nil {
		filter, _ = json.Marshal(req.Workflows)
	}
	p := frontdoor.Principal(r)
	d, err := s.deps.Replays.NewDataset(r.Context(), replay.DatasetInput{Tenant: p.Tenant, Name: req.Name, Description: req.Description,
		Selection: sel, Filter: filter, Expectations: req.Expectations,
		Creator: replay.Creator{Sub: p.Subject, ClientID: p.ClientID, Scopes: p.Scopes}})
	if err != nil {
		return err
	}
	status := http.StatusCreated
	rec := s.record(r, status)
	rec.Resource = audit.Resource{Type: "dataset", ID: d.ID}
	if name == "" {
		err = s.deps.Datasets.CreateDataset(r.Context(), d, rec)
	} else {
		err = s.deps.Datasets.AddDatasetVersion(r.Context(), d, rec)
	}
	if err != nil {
		return err
	}
	// The record was sealed with the version the store chose: say it in
	// the request's own record only through the resource.
	info := frontdoor.InfoFrom(r.Context())
	info.Audited, info.ResourceID = true, d.ID
	w.Header().Set("Location", "/v1/datasets/"+d.Ref())
	return frontdoor.WriteJSON(w, status, viewDataset(d))
}

func (s *Server) handleGetDataset(w http.ResponseWriter, r *http.Request) error {
	name, version, err := replay.ParseDatasetRef("name", r.PathValue("name"))
	if err != nil {
		return err
	}
	d, err := s.deps.Datasets.Dataset(r.Context(), frontdoor.Principal(r).Tenant, name, version)
	if err != nil {
		return err
	}
	frontdoor.InfoFrom(r.Context()).ResourceID = d.ID
	return frontdoor.WriteJSON(w, http.StatusOK, viewDataset(d))
}

func (s *Server) handleListDatasets(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := page.ParseSize("limit", q.Get("limit"))
	if err != nil {
		return err
	}
	ds, err := s.deps.Datasets.ListDatasets(r.Context(), frontdoor.Principal(r).Tenant, replay.DatasetListFilter{Limit: limit, After: q.Get("cursor")})
	if err != nil {
		return err
	}
	list := struct {
		Datasets   []datasetView `json:"datasets"`
		NextCursor *string       `json:"next_cursor"`
	}{Datasets: make([]datasetView, 0, len(ds))}
	for _, d := range ds {
		list.Datasets = append(list.Datasets, viewDataset(d))
	}
	if len(ds) == limit {
		list.NextCursor = &ds[len(ds)-1].Name
	}
	return frontdoor.WriteJSON(w, http.StatusOK, list)
}
