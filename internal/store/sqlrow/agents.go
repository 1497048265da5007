package sqlrow

import (
	"fmt"

	"github.com/agentplane/agentplane/internal/agent"
)

// ScanAgent scans an agent summary: name, default version, created and
// updated times, version count, latest version and its description, and
// archived time. A missing row's error is returned as it is.
func ScanAgent(s Scanner, tenant string) (*agent.Agent, error) {
	a := agent.Agent{Tenant: tenant}
	err := s.Scan(&a.Name, &a.DefaultVersion, Time(&a.CreatedAt), Time(&a.UpdatedAt), &a.Versions, &a.LatestVersion,
		&a.Description, OptionalTime(&a.ArchivedAt))
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan agent: %w", err)
	}
	return &a, nil
}

// ScanVersion scans an agent version: version, description, definition,
// external block, tools, deployed time, whether it is the default, and
// archived time. A missing row's error is returned as it is.
func ScanVersion(s Scanner, tenant, name string) (*agent.Version, error) {
	v := agent.Version{Tenant: tenant, Name: name}
	err := s.Scan(&v.Version, &v.Description, Raw(&v.Definition), JSON(&v.External, "agent version external block"),
		JSON(&v.Tools, "agent version tools"), Time(&v.DeployedAt), &v.Default, OptionalTime(&v.ArchivedAt))
	if IsNoRows(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("scan agent version: %w", err)
	}
	return &v, nil
}

// ScanNamedVersion scans the columns of ScanVersion followed by the
// version's agent name.
func ScanNamedVersion(s Scanner, tenant string) (*agent.Version, error) {
	var name string
	v, err := ScanVersion(With(s, &name), tenant, "")
	if v != nil {
		v.Name = name
	}
	return v, err
}

// EncodeExternal is an external version's block as its column's text, nil
// (NULL) for a defined version.
func EncodeExternal(x *agent.External) (any, error) {
	if x == nil {
		return nil, nil
	}
	return EncodeJSON(x, "agent version external block")
}
