-- Approvals (SPEC §4). A workflow paused at an approve step has status
-- 'waiting', no owner and no lease; its approval row holds the deadline at
-- which on_timeout applies and the run time it had left (remaining_ms), so
-- its own deadline moves on by the time it waited. A decision is recorded
-- once: only a 'pending' row is decided.
ALTER TABLE workflow_steps ADD COLUMN reason text NOT NULL DEFAULT '';

CREATE TABLE workflow_approvals (
	workflow_id    text    COLLATE "C" NOT NULL,
	step           integer NOT NULL,
	tenant         text    NOT NULL,
	agent          text    NOT NULL,
	agent_version  text    NOT NULL,
	action         text    NOT NULL,
	reason         text    NOT NULL,
	approver_scope text    NOT NULL,
	allow_self     boolean NOT NULL,
	on_timeout     text    NOT NULL,
	invoker        text    NOT NULL,
	requested_at   timestamptz NOT NULL,
	deadline       timestamptz NOT NULL,
	remaining_ms   bigint  NOT NULL,
	status         text    NOT NULL,
	decided_by     text    NOT NULL DEFAULT '',
	decided_at     timestamptz,
	comment        text    NOT NULL DEFAULT '',
	timed_out      boolean NOT NULL DEFAULT false,
	PRIMARY KEY (workflow_id, step)
);
CREATE INDEX workflow_approvals_tenant ON workflow_approvals (tenant, workflow_id DESC, step DESC);
CREATE INDEX workflow_approvals_due ON workflow_approvals (deadline) WHERE status = 'pending';
