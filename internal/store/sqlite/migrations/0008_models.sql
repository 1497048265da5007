-- The model registry (SPEC §4 "Models and LLM agents"): a tenant's LLM
-- endpoints, by name. auth holds a secrets reference, never a secret;
-- price is JSON null when absent; timeout_ns is the request timeout in
-- nanoseconds (a Go time.Duration).
CREATE TABLE models (
	id                 TEXT    NOT NULL PRIMARY KEY,
	tenant             TEXT    NOT NULL,
	name               TEXT    NOT NULL,
	provider           TEXT    NOT NULL,
	base_url           TEXT    NOT NULL,
	model              TEXT    NOT NULL,
	auth               TEXT    NOT NULL,
	headers            TEXT    NOT NULL,
	timeout_ns         INTEGER NOT NULL,
	max_concurrency    INTEGER NOT NULL,
	price              TEXT    NOT NULL,
	daily_token_budget INTEGER NOT NULL,
	revision           INTEGER NOT NULL,
	created_at         TEXT    NOT NULL,
	updated_at         TEXT    NOT NULL,
	UNIQUE (tenant, name)
);

-- The models each agent version names; DeleteModel refuses while one does.
-- "default" (the server-wide model) is recorded too, and is never deleted.
CREATE TABLE agent_version_models (
	tenant  TEXT NOT NULL,
	agent   TEXT NOT NULL,
	version TEXT NOT NULL,
	model   TEXT NOT NULL,
	PRIMARY KEY (tenant, agent, version, model)
);
CREATE INDEX agent_version_models_model ON agent_version_models (tenant, model);
