-- Rollouts (SPEC §4 "Change safety"): a rollout of an agent's target
-- version beside its default, canary (a sticky share of invocations runs
-- the target) or shadow (finished workflows of the default replayed against
-- the target as dry runs). At most one is active per agent. spec is the
-- checks and gate (replay.Spec as JSON); state is active, rolled_back,
-- promoted or ended; failed_check names the check whose gate rolled it
-- back. request_hash identifies the request that made it, so the same
-- request again finds it.
CREATE TABLE rollouts (
	tenant        text             NOT NULL,
	id            text             NOT NULL,
	agent         text             NOT NULL,
	base_version  text             NOT NULL,
	target        text             NOT NULL,
	percent       double precision NOT NULL,
	sticky        text             NOT NULL,
	mode          text             NOT NULL,
	spec          jsonb            NOT NULL,
	min_runs      integer          NOT NULL,
	auto_promote  boolean          NOT NULL,
	state         text             NOT NULL,
	failed_check  text             NOT NULL DEFAULT '',
	request_hash  text             NOT NULL,
	created_by    text             NOT NULL,
	created_at    timestamptz      NOT NULL,
	ended_at      timestamptz,
	PRIMARY KEY (tenant, id)
);
CREATE UNIQUE INDEX rollouts_active ON rollouts (tenant, agent) WHERE state = 'active';
CREATE INDEX rollouts_agent ON rollouts (tenant, agent, id);

-- Each finished run a rollout counts, once per workflow whichever replica
-- finished it: its arm (default, canary or shadow), outcome, tokens and
-- cost (currency '' when unpriced), and its checks' results.
CREATE TABLE rollout_runs (
	tenant        text             NOT NULL,
	rollout_id    text             NOT NULL,
	workflow_id   text             NOT NULL,
	arm           text             NOT NULL,
	outcome       text             NOT NULL,
	input_tokens  bigint           NOT NULL,
	output_tokens bigint           NOT NULL,
	cost          double precision NOT NULL,
	currency      text             NOT NULL,
	priced        boolean          NOT NULL,
	finished_at   timestamptz      NOT NULL,
	PRIMARY KEY (tenant, rollout_id, workflow_id)
);
CREATE TABLE rollout_checks (
	tenant      text NOT NULL,
	rollout_id  text NOT NULL,
	workflow_id text NOT NULL,
	arm         text NOT NULL,
	name        text NOT NULL,
	result      text NOT NULL,
	PRIMARY KEY (tenant, rollout_id, workflow_id, name)
);

-- The rollout arm a workflow ran ({id, arm}; NULL when none chose it).
ALTER TABLE workflows ADD COLUMN rollout jsonb;
