-- Audit: one chain per tenant. time is audit.TimeFormat text (UTC,
-- microseconds), which sorts as it reads and round-trips exactly.
CREATE TABLE audit_records (
	id               TEXT    NOT NULL PRIMARY KEY,
	tenant           TEXT    NOT NULL,
	seq              INTEGER NOT NULL,
	time             TEXT    NOT NULL,
	actor_sub        TEXT    NOT NULL,
	actor_client_id  TEXT    NOT NULL,
	action           TEXT    NOT NULL,
	resource_type    TEXT    NOT NULL,
	resource_id      TEXT    NOT NULL,
	outcome          TEXT    NOT NULL,
	status           INTEGER NOT NULL,
	request_id       TEXT    NOT NULL,
	trace_id         TEXT    NOT NULL,
	workflow_id      TEXT    NOT NULL,
	details          TEXT    NOT NULL,
	prev_hash        TEXT    NOT NULL,
	hash             TEXT    NOT NULL,
	UNIQUE (tenant, seq)
);
CREATE INDEX audit_records_actor_sub ON audit_records (tenant, actor_sub, seq);
CREATE INDEX audit_records_actor_client ON audit_records (tenant, actor_client_id, seq);
CREATE INDEX audit_records_action ON audit_records (tenant, action, seq);
CREATE INDEX audit_records_resource ON audit_records (tenant, resource_type, resource_id, seq);
CREATE INDEX audit_records_workflow ON audit_records (tenant, workflow_id, seq);
CREATE INDEX audit_records_outcome ON audit_records (tenant, outcome, seq);
CREATE INDEX audit_records_trace ON audit_records (tenant, trace_id, seq);
CREATE INDEX audit_records_time ON audit_records (tenant, time, seq);

-- The head of each tenant's chain: its last seq and hash.
CREATE TABLE audit_heads (
	tenant TEXT    NOT NULL PRIMARY KEY,
	seq    INTEGER NOT NULL,
	hash   TEXT    NOT NULL
);

CREATE TABLE idempotency_entries (
	tenant       TEXT    NOT NULL,
	principal    TEXT    NOT NULL,
	method       TEXT    NOT NULL,
	path         TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	fingerprint  TEXT    NOT NULL,
	state        TEXT    NOT NULL,
	status       INTEGER NOT NULL DEFAULT 0,
	header       TEXT    NOT NULL DEFAULT '{}',
	body         BLOB,
	workflow_id  TEXT    NOT NULL DEFAULT '',
	created_at   TEXT    NOT NULL,
	expires_at   TEXT    NOT NULL,
	locked_until TEXT    NOT NULL,
	PRIMARY KEY (tenant, principal, method, path, key)
);
CREATE INDEX idempotency_entries_expires ON idempotency_entries (expires_at);

CREATE TABLE signing_keys (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT NOT NULL UNIQUE,
	alg         TEXT NOT NULL,
	private_jwk BLOB NOT NULL,
	created_at  TEXT NOT NULL
);

CREATE TABLE oauth_clients (
	id          TEXT NOT NULL PRIMARY KEY,
	tenant      TEXT NOT NULL,
	name        TEXT NOT NULL,
	secret_hash TEXT NOT NULL,
	scopes      TEXT NOT NULL,
	created_at  TEXT NOT NULL
);
CREATE INDEX oauth_clients_tenant ON oauth_clients (tenant, id);

CREATE TABLE server_secrets (
	name  TEXT NOT NULL PRIMARY KEY,
	value BLOB NOT NULL
);

CREATE TABLE tools (
	id                  TEXT    NOT NULL PRIMARY KEY,
	tenant              TEXT    NOT NULL,
	name                TEXT    NOT NULL,
	type                TEXT    NOT NULL,
	spec_url            TEXT    NOT NULL,
	endpoint_url        TEXT    NOT NULL,
	auth                TEXT    NOT NULL,
	policy_class        TEXT    NOT NULL,
	side_effects        TEXT    NOT NULL,
	idempotency_support INTEGER NOT NULL,
	spec_sha256         TEXT    NOT NULL,
	revision            INTEGER NOT NULL,
	operation_count     INTEGER NOT NULL,
	base_url            TEXT    NOT NULL,
	spec_token_url      TEXT    NOT NULL,
	indexed_at          TEXT    NOT NULL,
	created_at          TEXT    NOT NULL,
	updated_at          TEXT    NOT NULL,
	UNIQUE (tenant, name)
);
CREATE INDEX tools_tenant ON tools (tenant, id);

-- data is the whole tool.Operation as JSON; the other columns are for search.
CREATE TABLE tool_operations (
	tenant      TEXT NOT NULL,
	tool_id     TEXT NOT NULL REFERENCES tools (id) ON DELETE CASCADE,
	op_id       TEXT NOT NULL,
	kind        TEXT NOT NULL,
	summary     TEXT NOT NULL,
	description TEXT NOT NULL,
	data        TEXT NOT NULL,
	PRIMARY KEY (tool_id, op_id)
);

-- The tools each agent version names; DeleteTool refuses while one does.
CREATE TABLE agent_version_tools (
	tenant    TEXT NOT NULL,
	agent     TEXT NOT NULL,
	version   TEXT NOT NULL,
	tool_name TEXT NOT NULL,
	PRIMARY KEY (tenant, agent, version, tool_name)
);
CREATE INDEX agent_version_tools_tool ON agent_version_tools (tenant, tool_name);
