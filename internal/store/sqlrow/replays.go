package sqlrow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/replay"
)

// DatasetColumns are the datasets table's columns, in the order of
// ScanDataset.
const DatasetColumns = `id, tenant, name, version, description, filter, workflow_count, creator, created_at`

// ScanDataset scans a row of DatasetColumns; a missing row's error is
// returned as it is.
func ScanDataset(s Scanner) (*replay.Dataset, error) {
	var (
		d       replay.Dataset
		filter  string
		creator []byte
	)
	err := s.Scan(&d.ID, &d.Tenant, &d.Name, &d.Version, &d.Description, &filter, &d.WorkflowCount, &creator,
		Time(&d.CreatedAt))
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan dataset: %w", err)
	}
	if filter != "" {
		d.Filter = json.RawMessage(filter)
	}
	if err := json.Unmarshal(creator, &d.Creator); err != nil {
		return nil, fmt.Errorf("decode dataset creator: %w", err)
	}
	return &d, nil
}

// ReplayColumns are the replays table's columns every replay has, in the
// order of ScanReplay.
const ReplayColumns = `id, tenant, workflow_id, target, created_at, creator, data`

// ScanReplay scans a row of ReplayColumns: the replay from data, with the
// columns data lacks (tenant, creator) or that are authoritative. A
// missing row's error is returned as it is.
func ScanReplay(s Scanner) (*replay.Replay, error) {
	var (
		id, tenant, wfID, target string
		r                        *replay.Replay
		created                  time.Time
		creator, data            []byte
	)
	err := s.Scan(&id, &tenant, &wfID, &target, Time(&created), &creator, &data)
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan replay: %w", err)
	}
	if r, err = replay.Decode(id, creator, data); err != nil {
		return nil, err
	}
	r.ID, r.Tenant, r.WorkflowID, r.Target, r.CreatedAt = id, tenant, wfID, target, created
	return r, nil
}
