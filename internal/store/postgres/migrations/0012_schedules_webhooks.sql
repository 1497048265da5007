-- Schedules: a tenant's timetables for invoking an agent. creator is the
-- workflow.Caller (sub, client_id, scopes) whose identity the schedule's
-- workflows run with.
CREATE TABLE schedules (
	id             text        COLLATE "C" NOT NULL PRIMARY KEY,
	tenant         text        NOT NULL,
	agent          text        NOT NULL,
	cron           text        NOT NULL,
	timezone       text        NOT NULL,
	goal           text        NOT NULL,
	context        json        NOT NULL,
	max_tool_calls integer,
	overlap        text        NOT NULL,
	paused         boolean     NOT NULL,
	creator        jsonb       NOT NULL,
	created_at     timestamptz NOT NULL,
	updated_at     timestamptz NOT NULL
);
CREATE INDEX schedules_tenant ON schedules (tenant, id);

-- The runs of schedules: one row per claimed due time, written in the
-- transaction that creates its workflow (workflow_id '' when the due time
-- was skipped), so a due time starts one workflow across replicas. A
-- manual trigger's run has no due time (NULL: never a conflict).
CREATE TABLE schedule_runs (
	schedule_id text        COLLATE "C" NOT NULL,
	due_at      timestamptz,
	workflow_id text        NOT NULL,
	created_at  timestamptz NOT NULL,
	UNIQUE (schedule_id, due_at)
);
CREATE INDEX schedule_runs_workflow ON schedule_runs (workflow_id) WHERE workflow_id <> '';

-- Webhooks: a tenant's endpoints. events is a JSON array of event types;
-- agent, when not '', limits them to one agent's events. secret signs the
-- deliveries (it is needed to sign, so it is kept; it is never shown
-- again); previous_secret signs them too until previous_until.
CREATE TABLE webhooks (
	id              text        COLLATE "C" NOT NULL PRIMARY KEY,
	tenant          text        NOT NULL,
	url             text        NOT NULL,
	events          jsonb       NOT NULL,
	agent           text        NOT NULL,
	description     text        NOT NULL,
	secret          text        NOT NULL,
	previous_secret text        NOT NULL,
	previous_until  timestamptz NOT NULL,
	created_at      timestamptz NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks (tenant, id);

-- The outbox: one row per event and webhook, written in the transaction
-- that stores the event. id is the webhook-id of every attempt; seq orders
-- the deliveries of one webhook and order_key (a workflow).
CREATE TABLE webhook_deliveries (
	seq             bigserial   PRIMARY KEY,
	id              text        COLLATE "C" NOT NULL UNIQUE,
	tenant          text        NOT NULL,
	webhook_id      text        COLLATE "C" NOT NULL,
	event_type      text        NOT NULL,
	order_key       text        NOT NULL,
	body            text        NOT NULL,
	status          text        NOT NULL,
	attempts        integer     NOT NULL,
	next_attempt_at timestamptz NOT NULL,
	last_status     integer     NOT NULL,
	last_error      text        NOT NULL,
	lease_owner     text        NOT NULL,
	lease_until     timestamptz NOT NULL,
	created_at      timestamptz NOT NULL,
	delivered_at    timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (webhook_id, order_key, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (webhook_id, seq DESC);
