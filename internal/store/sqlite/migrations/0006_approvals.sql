-- Approvals (SPEC §4). A workflow paused at an approve step has status
-- 'waiting', no owner and no lease; its approval row holds the deadline at
-- which on_timeout applies and the run time it had left (remaining_ms), so
-- its own deadline moves on by the time it waited. A decision is recorded
-- once: only a 'pending' row is decided.
ALTER TABLE workflow_steps ADD COLUMN reason TEXT NOT NULL DEFAULT '';

CREATE TABLE workflow_approvals (
	workflow_id    TEXT    NOT NULL,
	step           INTEGER NOT NULL,
	tenant         TEXT    NOT NULL,
	agent          TEXT    NOT NULL,
	agent_version  TEXT    NOT NULL,
	action         TEXT    NOT NULL,
	reason         TEXT    NOT NULL,
	approver_scope TEXT    NOT NULL,
	allow_self     INTEGER NOT NULL,
	on_timeout     TEXT    NOT NULL,
	invoker        TEXT    NOT NULL,
	requested_at   TEXT    NOT NULL,
	deadline       TEXT    NOT NULL,
	remaining_ms   INTEGER NOT NULL,
	status         TEXT    NOT NULL,
	decided_by     TEXT    NOT NULL DEFAULT '',
	decided_at     TEXT    NOT NULL DEFAULT '',
	comment        TEXT    NOT NULL DEFAULT '',
	timed_out      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (workflow_id, step)
);
CREATE INDEX workflow_approvals_tenant ON workflow_approvals (tenant, workflow_id DESC, step DESC);
CREATE INDEX workflow_approvals_due ON workflow_approvals (deadline) WHERE status = 'pending';
