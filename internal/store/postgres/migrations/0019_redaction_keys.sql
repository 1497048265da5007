-- Each tenant's redaction key (SPEC §4 "Data lifecycle and governance"):
-- the HMAC key of the [redacted:<kind>:<hex>] tokens that replace masked
-- values, made on first use; the first writer wins across replicas.
CREATE TABLE redaction_keys (
	tenant     text NOT NULL PRIMARY KEY,
	key        bytea NOT NULL,
	created_at timestamptz NOT NULL
);
