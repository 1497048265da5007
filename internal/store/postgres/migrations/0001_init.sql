-- Audit: one chain per tenant. time is a timestamptz, exact to the
-- microsecond as audit.TimeFormat is. details is text, not jsonb, so the
-- bytes hashed come back unchanged.
CREATE TABLE audit_records (
	id               text        NOT NULL PRIMARY KEY,
	tenant           text        NOT NULL,
	seq              bigint      NOT NULL,
	time             timestamptz NOT NULL,
	actor_sub        text        NOT NULL,
	actor_client_id  text        NOT NULL,
	action           text        NOT NULL,
	resource_type    text        NOT NULL,
	resource_id      text        NOT NULL,
	outcome          text        NOT NULL,
	status           integer     NOT NULL,
	request_id       text        NOT NULL,
	trace_id         text        NOT NULL,
	workflow_id      text        NOT NULL,
	details          text        NOT NULL,
	prev_hash        text        NOT NULL,
	hash             text        NOT NULL,
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

-- The head of each tenant's chain: its last seq and hash. Appends lock it
-- (SELECT … FOR UPDATE) for their final insert only.
CREATE TABLE audit_heads (
	tenant text   NOT NULL PRIMARY KEY,
	seq    bigint NOT NULL,
	hash   text   NOT NULL
);

CREATE TABLE idempotency_entries (
	tenant       text        NOT NULL,
	principal    text        NOT NULL,
	method       text        NOT NULL,
	path         text        NOT NULL,
	key          text        NOT NULL,
	fingerprint  text        NOT NULL,
	state        text        NOT NULL,
	status       integer     NOT NULL DEFAULT 0,
	header       jsonb       NOT NULL DEFAULT '{}',
	body         bytea,
	workflow_id  text        NOT NULL DEFAULT '',
	created_at   timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL,
	locked_until timestamptz NOT NULL,
	PRIMARY KEY (tenant, principal, method, path, key)
);
CREATE INDEX idempotency_entries_expires ON idempotency_entries (expires_at);

CREATE TABLE signing_keys (
	seq         bigserial   PRIMARY KEY,
	id          text        NOT NULL UNIQUE,
	alg         text        NOT NULL,
	private_jwk bytea       NOT NULL,
	created_at  timestamptz NOT NULL
);

CREATE TABLE oauth_clients (
	id          text        NOT NULL PRIMARY KEY,
	tenant      text        NOT NULL,
	name        text        NOT NULL,
	secret_hash text        NOT NULL,
	scopes      jsonb       NOT NULL,
	created_at  timestamptz NOT NULL
);
CREATE INDEX oauth_clients_tenant ON oauth_clients (tenant, id);

CREATE TABLE server_secrets (
	name  text  NOT NULL PRIMARY KEY,
	value bytea NOT NULL
);

CREATE TABLE tools (
	id                  text        NOT NULL PRIMARY KEY,
	tenant              text        NOT NULL,
	name                text        NOT NULL,
	type                text        NOT NULL,
	spec_url            text        NOT NULL,
	endpoint_url        text        NOT NULL,
	auth                jsonb       NOT NULL,
	policy_class        text        NOT NULL,
	side_effects        jsonb       NOT NULL,
	idempotency_support boolean     NOT NULL,
	spec_sha256         text        NOT NULL,
	revision            integer     NOT NULL,
	operation_count     integer     NOT NULL,
	base_url            text        NOT NULL,
	spec_token_url      text        NOT NULL,
	indexed_at          timestamptz NOT NULL,
	created_at          timestamptz NOT NULL,
	updated_at          timestamptz NOT NULL,
	UNIQUE (tenant, name)
);
CREATE INDEX tools_tenant ON tools (tenant, id);

-- data is the whole tool.Operation as JSON; the other columns are for search.
CREATE TABLE tool_operations (
	tenant      text  NOT NULL,
	tool_id     text  NOT NULL REFERENCES tools (id) ON DELETE CASCADE,
	op_id       text  NOT NULL,
	kind        text  NOT NULL,
	summary     text  NOT NULL,
	description text  NOT NULL,
	data        json  NOT NULL,
	PRIMARY KEY (tool_id, op_id)
);

-- The tools each agent version names; DeleteTool refuses while one does.
CREATE TABLE agent_version_tools (
	tenant    text NOT NULL,
	agent     text NOT NULL,
	version   text NOT NULL,
	tool_name text NOT NULL,
	PRIMARY KEY (tenant, agent, version, tool_name)
);
CREATE INDEX agent_version_tools_tool ON agent_version_tools (tenant, tool_name);
