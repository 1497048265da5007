-- The model registry (SPEC §4 "Models and LLM agents"): a tenant's LLM
-- endpoints, by name. auth holds a secrets reference, never a secret;
-- price is JSON null when absent; timeout_ns is the request timeout in
-- nanoseconds (a Go time.Duration).
CREATE TABLE models (
	id                 text        NOT NULL PRIMARY KEY,
	tenant             text        NOT NULL,
	name               text        NOT NULL,
	provider           text        NOT NULL,
	base_url           text        NOT NULL,
	model              text        NOT NULL,
	auth               jsonb       NOT NULL,
	headers            jsonb       NOT NULL,
	timeout_ns         bigint      NOT NULL,
	max_concurrency    integer     NOT NULL,
	price              jsonb       NOT NULL,
	daily_token_budget bigint      NOT NULL,
	revision           integer     NOT NULL,
	created_at         timestamptz NOT NULL,
	updated_at         timestamptz NOT NULL,
	UNIQUE (tenant, name)
);

-- The models each agent version names; DeleteModel refuses while one does.
-- "default" (the server-wide model) is recorded too, and is never deleted.
CREATE TABLE agent_version_models (
	tenant  text NOT NULL,
	agent   text NOT NULL,
	version text NOT NULL,
	model   text NOT NULL,
	PRIMARY KEY (tenant, agent, version, model)
);
CREATE INDEX agent_version_models_model ON agent_version_models (tenant, model);
