-- Agents and their immutable versions. seq is the deploy order within an
-- agent. Names, versions and ids sort bytewise (COLLATE "C"), as in SQLite.
CREATE TABLE agents (
	tenant          text        NOT NULL,
	name            text        COLLATE "C" NOT NULL,
	default_version text        NOT NULL,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	PRIMARY KEY (tenant, name)
);

CREATE TABLE agent_versions (
	tenant      text        NOT NULL,
	name        text        COLLATE "C" NOT NULL,
	version     text        COLLATE "C" NOT NULL,
	seq         integer     NOT NULL,
	description text        NOT NULL,
	definition  json        NOT NULL,
	tools       jsonb       NOT NULL,
	deployed_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, name, version),
	UNIQUE (tenant, name, seq)
);

-- Workflows. finished_at is NULL while running; lease_until is the zero time
-- (year 1) once the lease is released or the workflow has finished.
CREATE TABLE workflows (
	id               text        COLLATE "C" NOT NULL PRIMARY KEY,
	tenant           text        NOT NULL,
	agent            text        NOT NULL,
	agent_version    text        NOT NULL,
	status           text        NOT NULL,
	outcome          text        NOT NULL,
	goal             text        NOT NULL,
	context          json,
	caller           jsonb       NOT NULL,
	max_tool_calls   integer     NOT NULL,
	output           json,
	error            json,
	replay_of        text        NOT NULL,
	request_id       text        NOT NULL,
	trace_id         text        NOT NULL,
	started_at       timestamptz NOT NULL,
	finished_at      timestamptz,
	deadline         timestamptz NOT NULL,
	cancel_requested boolean     NOT NULL,
	owner            text        NOT NULL,
	lease_until      timestamptz NOT NULL
);
CREATE INDEX workflows_tenant ON workflows (tenant, id DESC);
CREATE INDEX workflows_agent ON workflows (tenant, agent, id);
CREATE INDEX workflows_status ON workflows (tenant, status, id);
CREATE INDEX workflows_lease ON workflows (status, lease_until);

-- One row per recorded step; seq is the event id.
CREATE TABLE workflow_steps (
	workflow_id text        NOT NULL,
	seq         integer     NOT NULL,
	step        integer     NOT NULL,
	action      text        NOT NULL,
	kind        text        NOT NULL,
	status      text        NOT NULL,
	tool        text        NOT NULL,
	operation   text        NOT NULL,
	args        json,
	score       double precision,
	queue       text        NOT NULL,
	outcome     text        NOT NULL,
	result      json,
	error       text        NOT NULL,
	request     json,
	http_status integer     NOT NULL,
	attempts    integer     NOT NULL,
	started_at  timestamptz NOT NULL,
	duration_ms bigint      NOT NULL,
	completion  json,
	PRIMARY KEY (workflow_id, seq)
);

-- Unrepeatable tool calls about to be sent; AppendStep clears its step's.
CREATE TABLE workflow_intents (
	workflow_id text        NOT NULL,
	step        integer     NOT NULL,
	tool        text        NOT NULL,
	operation   text        NOT NULL,
	at          timestamptz NOT NULL,
	PRIMARY KEY (workflow_id, step)
);

-- LLM completions of a workflow, by number, for replay.
CREATE TABLE workflow_completions (
	workflow_id text    NOT NULL,
	n           integer NOT NULL,
	data        json    NOT NULL,
	PRIMARY KEY (workflow_id, n)
);
