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
