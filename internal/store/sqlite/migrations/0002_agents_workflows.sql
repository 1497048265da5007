-- Agents and their immutable versions. seq is the deploy order within an
-- agent; times are audit.TimeFormat text like everywhere else.
CREATE TABLE agents (
	tenant          TEXT NOT NULL,
	name            TEXT NOT NULL,
	default_version TEXT NOT NULL,
	created_at      TEXT NOT NULL,
	updated_at      TEXT NOT NULL,
	PRIMARY KEY (tenant, name)
);

CREATE TABLE agent_versions (
	tenant      TEXT    NOT NULL,
	name        TEXT    NOT NULL,
	version     TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	description TEXT    NOT NULL,
	definition  TEXT    NOT NULL,
	tools       TEXT    NOT NULL,
	deployed_at TEXT    NOT NULL,
	PRIMARY KEY (tenant, name, version),
	UNIQUE (tenant, name, seq)
);

-- Workflows. finished_at is '' while running; lease_until is the zero time
-- once the lease is released or the workflow has finished.
CREATE TABLE workflows (
	id               TEXT    NOT NULL PRIMARY KEY,
	tenant           TEXT    NOT NULL,
	agent            TEXT    NOT NULL,
	agent_version    TEXT    NOT NULL,
	status           TEXT    NOT NULL,
	outcome          TEXT    NOT NULL,
	goal             TEXT    NOT NULL,
	context          TEXT,
	caller           TEXT    NOT NULL,
	max_tool_calls   INTEGER NOT NULL,
	output           TEXT,
	error            TEXT,
	replay_of        TEXT    NOT NULL,
	request_id       TEXT    NOT NULL,
	trace_id         TEXT    NOT NULL,
	started_at       TEXT    NOT NULL,
	finished_at      TEXT    NOT NULL,
	deadline         TEXT    NOT NULL,
	cancel_requested INTEGER NOT NULL,
	owner            TEXT    NOT NULL,
	lease_until      TEXT    NOT NULL
);
CREATE INDEX workflows_tenant ON workflows (tenant, id DESC);
CREATE INDEX workflows_agent ON workflows (tenant, agent, id);
CREATE INDEX workflows_status ON workflows (tenant, status, id);
CREATE INDEX workflows_lease ON workflows (status, lease_until);

-- One row per recorded step; seq is the event id.
CREATE TABLE workflow_steps (
	workflow_id TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	step        INTEGER NOT NULL,
	action      TEXT    NOT NULL,
	kind        TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	tool        TEXT    NOT NULL,
	operation   TEXT    NOT NULL,
	args        TEXT,
	score       REAL,
	queue       TEXT    NOT NULL,
	outcome     TEXT    NOT NULL,
	result      TEXT,
	error       TEXT    NOT NULL,
	request     TEXT,
	http_status INTEGER NOT NULL,
	attempts    INTEGER NOT NULL,
	started_at  TEXT    NOT NULL,
	duration_ms INTEGER NOT NULL,
	completion  TEXT,
	PRIMARY KEY (workflow_id, seq)
);

-- Unrepeatable tool calls about to be sent; AppendStep clears its step's.
CREATE TABLE workflow_intents (
	workflow_id TEXT    NOT NULL,
	step        INTEGER NOT NULL,
	tool        TEXT    NOT NULL,
	operation   TEXT    NOT NULL,
	at          TEXT    NOT NULL,
	PRIMARY KEY (workflow_id, step)
) WITHOUT ROWID;

-- LLM completions of a workflow, by number, for replay.
CREATE TABLE workflow_completions (
	workflow_id TEXT    NOT NULL,
	n           INTEGER NOT NULL,
	data        TEXT    NOT NULL,
	PRIMARY KEY (workflow_id, n)
);
