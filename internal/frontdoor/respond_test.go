package frontdoor

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/problem"
)

// linkRefused is a PageError as a signed page's refused link is one.
type linkRefused struct{ err error }

func (e *linkRefused) Error() string { return e.err.Error() }
func (e *linkRefused) Unwrap() error { return e.err }
func (e *linkRefused) WritePage(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte("<p>ask for a fresh link</p>"))
}

func TestWriteProblemHooks(t *testing.T) {
	notFound := problem.New(problem.NotFound, "no such page")
	page := func(w http.ResponseWriter, r *http.Request, pe *problem.Error, status int) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		w.Write([]byte("<p>" + pe.Detail + "</p>"))
	}
	for _, tc := range []struct {
		name        string
		err         error
		accept      string
		problemPage func(http.ResponseWriter, *http.Request, *problem.Error, int)
		wantType    string
		wantBody    string
	}{
		{name: "problem document", err: notFound, wantType: "application/problem+json"},
		{name: "page error to a program", err: &linkRefused{notFound}, wantType: "application/problem+json"},
		{name: "page error to a browser", err: &linkRefused{notFound}, accept: "text/html",
			wantType: "text/html; charset=utf-8", wantBody: "<p>ask for a fresh link</p>"},
		{name: "problem page hook", err: notFound, problemPage: page,
			wantType: "text/html; charset=utf-8", wantBody: "<p>no such page</p>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := &Info{RequestID: "req_1", ProblemPage: tc.problemPage}
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			if tc.accept != "" {
				r.Header.Set("Accept", tc.accept)
			}
			r = r.WithContext(WithInfo(r.Context(), info))
			w := httptest.NewRecorder()
			WriteProblem(w, r, tc.err)
			if w.Code != http.StatusNotFound {
				t.Errorf("status %d, want 404", w.Code)
			}
			if got := w.Header().Get("Content-Type"); got != tc.wantType {
				t.Errorf("Content-Type %q, want %q", got, tc.wantType)
			}
			if info.Problem == nil || info.Problem.Code != problem.NotFound {
				t.Errorf("the request's info holds problem %v, want not_found", info.Problem)
			}
			if tc.wantBody != "" {
				if w.Body.String() != tc.wantBody {
					t.Errorf("body %q, want %q", w.Body.String(), tc.wantBody)
				}
				return
			}
			var doc struct {
				Status    int    `json:"status"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || doc.Status != 404 || doc.RequestID != "req_1" {
				t.Errorf("problem document %s (%v)", w.Body.String(), err)
			}
		})
	}
}

func TestAdapt(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	for _, tc := range []struct {
		name       string
		begin      bool
		wantStatus int
		wantLog    bool
	}{
		{name: "error before the response", wantStatus: http.StatusNotFound},
		{name: "error after the response began", begin: true, wantStatus: http.StatusOK, wantLog: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged.Reset()
			h := Adapt(log, func(w http.ResponseWriter, r *http.Request) error {
				if tc.begin {
					w.WriteHeader(http.StatusOK)
				}
				return problem.New(problem.NotFound, "gone")
			})
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			r = r.WithContext(WithInfo(r.Context(), &Info{RequestID: "req_2"}))
			h.ServeHTTP(&StatusWriter{ResponseWriter: rec}, r)
			if rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			if got := strings.Contains(logged.String(), "request_id=req_2"); got != tc.wantLog {
				t.Errorf("logged %q, want a line: %v", logged.String(), tc.wantLog)
			}
		})
	}
}
