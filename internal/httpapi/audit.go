package httpapi

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/frontdoor"
)

type auditPage struct {
	Records    []audit.Record `json:"records"`
	NextCursor *string        `json:"next_cursor"`
}

func handleAuditQuery(store audit.Store) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var q audit.Query
		if r.Method == http.MethodPost {
			if err := frontdoor.DecodeJSON(r, &q); err != nil {
				return err
			}
		} else if err := q.FromValues(r.URL.Query()); err != nil {
			return err
		}
		f, err := q.Filter()
		if err != nil {
			return err
		}
		recs, err := store.QueryAudit(r.Context(), frontdoor.Principal(r).Tenant, f)
		if err != nil {
			return err
		}
		page := auditPage{Records: recs}
		if page.Records == nil {
			page.Records = []audit.Record{}
		}
		if len(recs) == f.Limit && len(recs) > 0 {
			c := audit.EncodeCursor(recs[len(recs)-1].Seq)
			page.NextCursor = &c
		}
		return frontdoor.WriteJSON(w, http.StatusOK, page)
	}
}

func handleAuditVerify(store audit.Store) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		rep, err := audit.Verify(r.Context(), store, frontdoor.Principal(r).Tenant)
		if err != nil {
			return err
		}
		return frontdoor.WriteJSON(w, http.StatusOK, rep)
	}
}
