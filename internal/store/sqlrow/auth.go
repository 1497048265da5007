package sqlrow

import (
	"fmt"

	"github.com/agentplane/agentplane/internal/auth"
)

// ScanClient scans a client: id, tenant, name, secret hash, scopes,
// created time and revoked time (unset when it is not). A missing row's
// error is returned as it is.
func ScanClient(s Scanner) (auth.Client, error) {
	var c auth.Client
	err := s.Scan(&c.ID, &c.Tenant, &c.Name, &c.SecretHash, JSON(&c.Scopes, "client scopes"), Time(&c.CreatedAt),
		OptionalTime(&c.RevokedAt))
	if IsNoRows(err) {
		return c, err
	}
	if err != nil {
		return c, fmt.Errorf("load client: %w", err)
	}
	return c, nil
}

// SigningKeyColumns are the signing_keys table's columns, in the order of
// ScanSigningKey.
const SigningKeyColumns = `id, alg, private_jwk, created_at`

// ScanSigningKey scans a row of SigningKeyColumns.
func ScanSigningKey(s Scanner) (auth.SigningKey, error) {
	var k auth.SigningKey
	if err := s.Scan(&k.ID, &k.Algorithm, &k.PrivateJWK, Time(&k.CreatedAt)); err != nil {
		return k, fmt.Errorf("scan signing key: %w", err)
	}
	return k, nil
}
