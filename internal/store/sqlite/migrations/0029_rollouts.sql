-- Rollouts (SPEC §4 "Change safety"): a rollout of an agent's target
-- version beside its default, canary (a sticky share of invocations runs
-- the target) or shadow (finished workflows of the default replayed against
-- the target as dry runs). At most one is active per agent. spec is the
-- checks and gate (replay.Spec as JSON); state is active, rolled_back,
-- promoted or ended; failed_check names the check whose gate rolled it
-- back. request_hash identifies the request that made it, so the same
-- request again finds it.
CREATE TABLE rollouts (
	tenant        TEXT             NOT NULL,
	id            TEXT             NOT NULL,
	agent         TEXT             NOT NULL,
	base_version  TEXT             NOT NULL,
	target        TEXT             NOT NULL,
	percent       REAL             NOT NULL,
	sticky        TEXT             NOT NULL,
	mode          TEXT             NOT NULL,
	spec          TEXT             NOT NULL,
	min_runs      INTEGER          NOT NULL,
	auto_promote  INTEGER          NOT NULL,
	state         TEXT             NOT NULL,
	failed_check  TEXT             NOT NULL DEFAULT '',
	request_hash  TEXT             NOT NULL,
	created_by    TEXT             NOT NULL,
	created_at    TEXT             NOT NULL,
	ended_at      TEXT             NOT NULL DEFAULT '',
	PRIMARY KEY (tenant, id)
);
CREATE UNIQUE INDEX rollouts_active ON rollouts (tenant, agent) WHERE state = 'active';
CREATE INDEX rollouts_agent ON rollouts (tenant, agent, id);

-- Each finished run a rollout counts, once per workflow whichever replica
-- finished it: its arm (default, canary or shadow), outcome, tokens and
-- cost (currency '' when unpriced), and its checks' results.
CREATE TABLE rollout_runs (
	tenant        TEXT             NOT NULL,
	rollout_id    TEXT             NOT NULL,
	workflow_id   TEXT             NOT NULL,
	arm           TEXT             NOT NULL,
	outcome       TEXT             NOT NULL,
	input_tokens  INTEGER          NOT NULL,
	output_tokens INTEGER          NOT NULL,
	cost          REAL             NOT NULL,
	currency      TEXT             NOT NULL,
	priced        INTEGER          NOT NULL,
	finished_at   TEXT             NOT NULL,
	PRIMARY KEY (tenant, rollout_id, workflow_id)
);
CREATE TABLE rollout_checks (
	tenant      TEXT NOT NULL,
	rollout_id  TEXT NOT NULL,
	workflow_id TEXT NOT NULL,
	arm         TEXT NOT NULL,
	name        TEXT NOT NULL,
	result      TEXT NOT NULL,
	PRIMARY KEY (tenant, rollout_id, workflow_id, name)
);

-- The rollout arm a workflow ran ({id, arm}; NULL when none chose it).
ALTER TABLE workflows ADD COLUMN rollout TEXT;
