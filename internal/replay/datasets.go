package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/ids"
	"github.com/agentplane/agentplane/internal/problem"
)

// MaxDescription is the longest description a dataset keeps, in bytes.
const MaxDescription = 4096

// Expectation is what a dataset expects of a workflow's replay: its
// outcome, its output, or both.
type Expectation struct {
	Outcome string          `json:"outcome,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
}

// A Dataset is a named, immutable version of a list of workflows chosen as
// a regression suite, with what is expected of some of them.
type Dataset struct {
	ID          string `json:"id"`
	Tenant      string `json:"-"`
	Name        string `json:"name"`
	Version     int    `json:"version"`
	Description string `json:"description,omitempty"`
	// Filter is the selection the workflows were chosen by, when it was
	// a filter (as the request gave it).
	Filter        json.RawMessage `json:"workflows_filter,omitempty"`
	WorkflowCount int             `json:"workflow_count"`
	// WorkflowIDs and Expectations are loaded by Dataset, not by lists.
	WorkflowIDs  []string               `json:"workflow_ids,omitempty"`
	Expectations map[string]Expectation `json:"expectations,omitempty"`
	Creator      Creator                `json:"-"`
	CreatedAt    time.Time              `json:"created_at"`
}

// Ref is name@version.
func (d *Dataset) Ref() string { return d.Name + "@" + strconv.Itoa(d.Version) }

// DatasetListFilter pages the tenant's datasets by name.
type DatasetListFilter struct {
	Limit int
	// After is the name of the last dataset of the previous page.
	After string
}

// DatasetStore keeps datasets.
type DatasetStore interface {
	// CreateDataset stores d as version 1 of a new name with rec, its audit
	// record; problem.Conflict when the tenant has the name already.
	CreateDataset(ctx context.Context, d *Dataset, rec *audit.Record) error
	// AddDatasetVersion stores d as the next version of its name, setting
	// d.Version; problem.NotFound when the name has no version yet.
	AddDatasetVersion(ctx context.Context, d *Dataset, rec *audit.Record) error
	// Dataset returns a version of the tenant's dataset (the latest when
	// version is 0) with its workflows and expectations, or problem.NotFound.
	Dataset(ctx context.Context, tenant, name string, version int) (*Dataset, error)
	// ListDatasets returns the latest version of each of the tenant's
	// datasets, by name, without their workflows.
	ListDatasets(ctx context.Context, tenant string, f DatasetListFilter) ([]*Dataset, error)
}

// DatasetNotFound is the error for a dataset (or version) the tenant lacks.
func DatasetNotFound(name string, version int) error {
	if version > 0 {
		return problem.New(problem.NotFound, "no dataset %s@%d: list its versions with GET /v1/datasets/%s", name, version, name)
	}
	return problem.New(problem.NotFound, "no dataset %s: create it with POST /v1/datasets", name)
}

// ParseDatasetRef splits name[@version]; version is 0 when absent (the
// latest). field names the field in errors.
func ParseDatasetRef(field, ref string) (name string, version int, err error) {
	name, v, hasVersion := strings.Cut(ref, "@")
	if !agent.NameRE.MatchString(name) {
		return "", 0, problem.Field(field, "%q is not a dataset: give name or name@version, for example checkout-regressions@2", ref)
	}
	if hasVersion {
		if version, err = strconv.Atoi(v); err != nil || version < 1 {
			return "", 0, problem.Field(field, "%q has no version number after @: give name or name@version, for example %s@1", ref, name)
		}
	}
	return name, version, nil
}

// DatasetInput is a dataset version as a request gives it.
type DatasetInput struct {
	Tenant, Name, Description string
	Selection                 Selection
	// Filter is the request's filter as it gave it, kept with the version.
	Filter       json.RawMessage
	Expectations map[string]Expectation
	Creator      Creator
}

// NewDataset resolves and validates a dataset version: its workflows must
// be finished workflows of the tenant (validation errors name the others),
// at most MaxBatch of them, and every expectation must be of one of them.
func (s *Service) NewDataset(ctx context.Context, in DatasetInput) (*Dataset, error) {
	var errs []problem.FieldError
	if !agent.NameRE.MatchString(in.Name) {
		errs = append(errs, problem.FieldError{Field: "name", Message: fmt.Sprintf("%q is not a name: use lowercase letters, digits and -, starting with a letter", in.Name)})
	}
	if len(in.Description) > MaxDescription {
		errs = append(errs, problem.FieldError{Field: "description", Message: fmt.Sprintf("is %d bytes, over the limit of %d", len(in.Description), MaxDescription)})
	}
	if len(in.Selection.IDs) > MaxBatch {
		errs = append(errs, problem.FieldError{Field: "workflow_ids", Message: fmt.Sprintf("lists %d workflows, over the limit of %d", len(in.Selection.IDs), MaxBatch)})
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	if len(in.Selection.IDs) == 0 && in.Selection.Limit == 0 {
		in.Selection.Limit = MaxBatch
	}
	wfs, err := s.Select(ctx, in.Tenant, in.Selection)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(in.Expectations))
	for id := range in.Expectations {
		keys = append(keys, id)
	}
	slices.Sort(keys)
	in2 := make(map[string]bool, len(wfs))
	for _, id := range wfs {
		in2[id] = true
	}
	for _, id := range keys {
		e := in.Expectations[id]
		field := "expectations." + id
		switch {
		case !in2[id]:
			errs = append(errs, problem.FieldError{Field: field, Message: "workflow " + id + " is not in the dataset: expect only of the workflows it selects"})
		case e.Outcome == "" && len(e.Output) == 0:
			errs = append(errs, problem.FieldError{Field: field, Message: "expects nothing: give outcome, output or both"})
		case len(e.Output) > 0 && !json.Valid(e.Output):
			errs = append(errs, problem.FieldError{Field: field + ".output", Message: "is not JSON"})
		}
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs...)
	}
	now := s.now()
	return &Dataset{ID: ids.NewAt(ids.Dataset, now), Tenant: in.Tenant, Name: in.Name, Description: in.Description,
		Filter: in.Filter, WorkflowCount: len(wfs), WorkflowIDs: wfs, Expectations: in.Expectations,
		Creator: in.Creator, CreatedAt: now}, nil
}

// Encode is what the stores keep of d beside its columns: its creator as
// JSON, and the expectation of each workflow, in order, as JSON or "".
func (d *Dataset) Encode() (creator string, expected []string, err error) {
	c, err := json.Marshal(d.Creator)
	if err != nil {
		return "", nil, fmt.Errorf("encode dataset creator: %w", err)
	}
	b := &Batch{Expectations: d.Expectations}
	if _, expected, err = EncodeBatchChecks(b, d.WorkflowIDs); err != nil {
		return "", nil, err
	}
	return string(c), expected, nil
}

// AddItem appends a stored workflow and its expectation ("" for none).
func (d *Dataset) AddItem(workflowID, expected string) error {
	d.WorkflowIDs = append(d.WorkflowIDs, workflowID)
	e, err := DecodeExpectation(expected)
	if err != nil || e == nil {
		return err
	}
	if d.Expectations == nil {
		d.Expectations = map[string]Expectation{}
	}
	d.Expectations[workflowID] = *e
	return nil
}
