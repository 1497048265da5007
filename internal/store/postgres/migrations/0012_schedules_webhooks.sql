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
