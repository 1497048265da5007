-- Schedules: a tenant's timetables for invoking an agent. creator is the
-- workflow.Caller (sub, client_id, scopes) whose identity the schedule's
-- workflows run with.
CREATE TABLE schedules (
	id             TEXT        NOT NULL PRIMARY KEY,
	tenant         TEXT        NOT NULL,
	agent          TEXT        NOT NULL,
	cron           TEXT        NOT NULL,
	timezone       TEXT        NOT NULL,
	goal           TEXT        NOT NULL,
	context        TEXT        NOT NULL,
	max_tool_calls INTEGER,
	overlap        TEXT        NOT NULL,
	paused         INTEGER     NOT NULL,
	creator        TEXT        NOT NULL,
	created_at     TEXT        NOT NULL,
	updated_at     TEXT        NOT NULL
);
CREATE INDEX schedules_tenant ON schedules (tenant, id);

-- The runs of schedules: one row per claimed due time, written in the
-- transaction that creates its workflow (workflow_id '' when the due time
-- was skipped), so a due time starts one workflow across replicas. A
-- manual trigger's run has no due time (NULL: never a conflict).
CREATE TABLE schedule_runs (
	schedule_id TEXT        NOT NULL,
	due_at      TEXT,
	workflow_id TEXT        NOT NULL,
	created_at  TEXT        NOT NULL,
	UNIQUE (schedule_id, due_at)
);
CREATE INDEX schedule_runs_workflow ON schedule_runs (workflow_id) WHERE workflow_id <> '';

-- Webhooks: a tenant's endpoints. events is a JSON array of event types;
-- agent, when not '', limits them to one agent's events. secret signs the
-- deliveries (it is needed to sign, so it is kept; it is never shown
-- again); previous_secret signs them too until previous_until.
CREATE TABLE webhooks (
	id              TEXT    NOT NULL PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	url             TEXT    NOT NULL,
	events          TEXT    NOT NULL,
	agent           TEXT    NOT NULL,
	description     TEXT    NOT NULL,
	secret          TEXT    NOT NULL,
	previous_secret TEXT    NOT NULL,
	previous_until  TEXT    NOT NULL,
	created_at      TEXT    NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks (tenant, id);

-- The outbox: one row per event and webhook, written in the transaction
-- that stores the event. id is the webhook-id of every attempt; seq orders
-- the deliveries of one webhook and order_key (a workflow).
CREATE TABLE webhook_deliveries (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT,
	id              TEXT    NOT NULL UNIQUE,
	tenant          TEXT    NOT NULL,
	webhook_id      TEXT    NOT NULL,
	event_type      TEXT    NOT NULL,
	order_key       TEXT    NOT NULL,
	body            TEXT    NOT NULL,
	status          TEXT    NOT NULL,
	attempts        INTEGER NOT NULL,
	next_attempt_at TEXT    NOT NULL,
	last_status     INTEGER NOT NULL,
	last_error      TEXT    NOT NULL,
	lease_owner     TEXT    NOT NULL,
	lease_until     TEXT    NOT NULL,
	created_at      TEXT    NOT NULL,
	delivered_at    TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (webhook_id, order_key, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (webhook_id, seq DESC);
