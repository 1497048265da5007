package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/siem"
)

var exportParams = []string{"format", "ocsf_version", "cursor", "limit"}

// exportEnd is the last line of an export: where the next one starts, and
// whether more records were there already (the page was full).
type exportEnd struct {
	NextCursor string `json:"next_cursor"`
	More       bool   `json:"more"`
}

// handleAuditExport answers GET /v1/audit/export: the tenant's records
// after the cursor, oldest first, one OCSF event per line, then
// {"next_cursor", "more"}.
func handleAuditExport(store siem.Scanner, version string) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		mapper := siem.Mapper{Version: version, OCSF: siem.OCSFVersion}
		v := r.URL.Query()
		var errs []problem.FieldError
		for k := range v {
			if !slices.Contains(exportParams, k) {
				errs = append(errs, problem.FieldError{Field: k, Message: "unknown query parameter; known: " + strings.Join(exportParams, ", ")})
			}
		}
		if f := v.Get("format"); f != "" && !slices.Contains(siem.Formats, f) {
			errs = append(errs, problem.FieldError{Field: "format", Message: strconv.Quote(f) + " is not supported; supported: " + strings.Join(siem.Formats, ", ")})
		}
		if o := v.Get("ocsf_version"); o != "" {
			if !slices.Contains(siem.OCSFVersions, o) {
				errs = append(errs, problem.FieldError{Field: "ocsf_version", Message: strconv.Quote(o) + " is not written; write one of " + strings.Join(siem.OCSFVersions, ", ")})
			}
			mapper.OCSF = o
		}
		after, err := siem.DecodeCursor(v.Get("cursor"))
		if err != nil {
			errs = append(errs, problem.FieldError{Field: "cursor", Message: "is not a cursor this endpoint returned: pass the next_cursor of the last line, or none to start at the oldest record"})
		}
		limit := siem.DefaultExportLimit
		if s := v.Get("limit"); s != "" {
			if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > siem.MaxExportLimit {
				errs = append(errs, problem.FieldError{Field: "limit", Message: "must be an integer from 1 to " + strconv.Itoa(siem.MaxExportLimit)})
			}
		}
		if len(errs) > 0 {
			return problem.Validation(errs...)
		}
		b, err := mapper.Read(r.Context(), store, frontdoor.Principal(r).Tenant, after, limit)
		if err != nil {
			return err
		}
		end, err := frontdoor.Marshal(exportEnd{NextCursor: siem.EncodeCursor(b.LastSeq), More: len(b.Lines) == limit})
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(b.NDJSON()); err != nil {
			return err
		}
		_, err = w.Write(end)
		return err
	}
}
