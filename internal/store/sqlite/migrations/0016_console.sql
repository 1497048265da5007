-- The web console's sign-in records (SPEC §4 "Console"): one-time sign-in
-- links and pending OpenID Connect logins (grants, redeemed once), and
-- sessions. Secrets are kept only as their SHA-256, so a copy of the
-- database signs nobody in. Times are UTC text like everywhere here.
CREATE TABLE console_grants (
	id_hash            TEXT NOT NULL PRIMARY KEY,
	kind               TEXT NOT NULL,
	tenant             TEXT NOT NULL,
	subject            TEXT NOT NULL,
	client_id          TEXT NOT NULL,
	scopes             TEXT NOT NULL,
	session_expires_at TEXT NOT NULL,
	verifier           TEXT NOT NULL,
	nonce              TEXT NOT NULL,
	next               TEXT NOT NULL,
	created_at         TEXT NOT NULL,
	expires_at         TEXT NOT NULL,
	used_at            TEXT
);
CREATE INDEX console_grants_expires ON console_grants (expires_at);

CREATE TABLE console_sessions (
	id_hash    TEXT NOT NULL PRIMARY KEY,
	tenant     TEXT NOT NULL,
	subject    TEXT NOT NULL,
	client_id  TEXT NOT NULL,
	scopes     TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
