package sqlrow

import "fmt"

// ScanGeneration scans a tenant's catalog generation: 0 when the tenant
// has no row yet (nothing of its catalog has changed).
func ScanGeneration(s Scanner) (int64, error) {
	var gen int64
	err := s.Scan(&gen)
	if IsNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("catalog generation: %w", err)
	}
	return gen, nil
}
