-- The web console's sign-in records (SPEC §4 "Console"): one-time sign-in
-- links and pending OpenID Connect logins (grants, redeemed once), and
-- sessions. Secrets are kept only as their SHA-256, so a copy of the
-- database signs nobody in.
CREATE TABLE console_grants (
	id_hash            text        NOT NULL PRIMARY KEY,
	kind               text        NOT NULL,
	tenant             text        NOT NULL,
	subject            text        NOT NULL,
	client_id          text        NOT NULL,
	scopes             jsonb       NOT NULL,
	session_expires_at timestamptz NOT NULL,
	verifier           text        NOT NULL,
	nonce              text        NOT NULL,
	next               text        NOT NULL,
	created_at         timestamptz NOT NULL,
	expires_at         timestamptz NOT NULL,
	used_at            timestamptz
);
CREATE INDEX console_grants_expires ON console_grants (expires_at);

CREATE TABLE console_sessions (
	id_hash    text        NOT NULL PRIMARY KEY,
	tenant     text        NOT NULL,
	subject    text        NOT NULL,
	client_id  text        NOT NULL,
	scopes     jsonb       NOT NULL,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
