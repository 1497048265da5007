-- A completion is recorded with the numbers usage and budgets are counted
-- from: its step, who ran it (tenant, agent, version), the registered model
-- and the provider's model that answered, the tokens the provider reported,
-- the cost at the model's price (currency empty: no price), the finish
-- reason and when it was recorded. Completions recorded before keep zeros.
ALTER TABLE workflow_completions ADD COLUMN step integer NOT NULL DEFAULT 0;
ALTER TABLE workflow_completions ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN agent text NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN agent_version text NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN model text NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN provider_model text NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE workflow_completions ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE workflow_completions ADD COLUMN cost double precision NOT NULL DEFAULT 0;
ALTER TABLE workflow_completions ADD COLUMN currency text NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN finish_reason text NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN created_at timestamptz;

-- A tenant's usage per UTC day, agent, model and currency, added to in the
-- transaction that records each completion: what GET /v1/usage reports and
-- daily token budgets are checked against, shared by the replicas.
CREATE TABLE llm_usage_daily (
	tenant        text    NOT NULL,
	day           date    NOT NULL,
	agent         text    NOT NULL,
	model         text    NOT NULL,
	currency      text    NOT NULL,
	input_tokens  bigint  NOT NULL,
	output_tokens bigint  NOT NULL,
	completions   bigint  NOT NULL,
	cost          double precision NOT NULL,
	PRIMARY KEY (tenant, day, model, agent, currency)
);

-- A completion's step (kind completion) shows its model, tokens, finish
-- reason and the stable cause of an error.
ALTER TABLE workflow_steps ADD COLUMN model text NOT NULL DEFAULT '';
ALTER TABLE workflow_steps ADD COLUMN input_tokens bigint;
ALTER TABLE workflow_steps ADD COLUMN output_tokens bigint;
ALTER TABLE workflow_steps ADD COLUMN finish_reason text NOT NULL DEFAULT '';
ALTER TABLE workflow_steps ADD COLUMN error_code text NOT NULL DEFAULT '';

-- An invocation's bound on its completions' tokens (0: the definition's).
ALTER TABLE workflows ADD COLUMN max_llm_tokens bigint NOT NULL DEFAULT 0;
