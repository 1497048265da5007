package sqlrow

import (
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/model"
)

// ModelColumns are the models table's columns, in the order of ModelValues
// and ScanModel.
const ModelColumns = `id, tenant, name, provider, base_url, model, auth, headers, timeout_ns,
	max_concurrency, price, daily_token_budget, revision, created_at, updated_at, http2_prior_knowledge`

// ModelValues are m's values in ModelColumns order, times written by at.
func ModelValues(m *model.Model, at Times) ([]any, error) {
	auth, headers, price, err := model.EncodeColumns(m)
	if err != nil {
		return nil, err
	}
	return []any{m.ID, m.Tenant, m.Name, m.Provider, m.BaseURL, m.Model, string(auth), string(headers),
		int64(m.Timeout), m.MaxConcurrency, string(price), m.DailyTokenBudget, m.Revision,
		at(m.CreatedAt), at(m.UpdatedAt), m.HTTP2PriorKnowledge}, nil
}

// ScanModel scans a row of ModelColumns; a missing row's error is returned
// as it is.
func ScanModel(s Scanner) (*model.Model, error) {
	var (
		m                 model.Model
		auth, hdrs, price []byte
		timeout           int64
	)
	err := s.Scan(&m.ID, &m.Tenant, &m.Name, &m.Provider, &m.BaseURL, &m.Model, &auth, &hdrs, &timeout,
		&m.MaxConcurrency, &price, &m.DailyTokenBudget, &m.Revision, Time(&m.CreatedAt), Time(&m.UpdatedAt),
		&m.HTTP2PriorKnowledge)
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan model: %w", err)
	}
	m.Timeout = time.Duration(timeout)
	if err := model.DecodeColumns(&m, auth, hdrs, price); err != nil {
		return nil, err
	}
	return &m, nil
}
