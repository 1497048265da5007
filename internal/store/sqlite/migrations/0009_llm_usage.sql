-- A completion is recorded with the numbers usage and budgets are counted
-- from: its step, who ran it (tenant, agent, version), the registered model
-- and the provider's model that answered, the tokens the provider reported,
-- the cost at the model's price (currency empty: no price), the finish
-- reason and when it was recorded. Completions recorded before keep zeros.
ALTER TABLE workflow_completions ADD COLUMN step INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_completions ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN agent TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN agent_version TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN provider_model TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_completions ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_completions ADD COLUMN cost REAL NOT NULL DEFAULT 0;
ALTER TABLE workflow_completions ADD COLUMN currency TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN finish_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_completions ADD COLUMN created_at TEXT NOT NULL DEFAULT '';

-- A tenant's usage per UTC day, agent, model and currency, added to in the
-- transaction that records each completion: what GET /v1/usage reports and
-- daily token budgets are checked against, shared by the replicas.
CREATE TABLE llm_usage_daily (
	tenant        TEXT    NOT NULL,
	day           TEXT    NOT NULL,
	agent         TEXT    NOT NULL,
	model         TEXT    NOT NULL,
	currency      TEXT    NOT NULL,
	input_tokens  INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	completions   INTEGER NOT NULL,
	cost          REAL    NOT NULL,
	PRIMARY KEY (tenant, day, model, agent, currency)
);

-- A completion's step (kind completion) shows its model, tokens, finish
-- reason and the stable cause of an error.
ALTER TABLE workflow_steps ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_steps ADD COLUMN input_tokens INTEGER;
ALTER TABLE workflow_steps ADD COLUMN output_tokens INTEGER;
ALTER TABLE workflow_steps ADD COLUMN finish_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_steps ADD COLUMN error_code TEXT NOT NULL DEFAULT '';

-- An invocation's bound on its completions' tokens (0: the definition's).
ALTER TABLE workflows ADD COLUMN max_llm_tokens INTEGER NOT NULL DEFAULT 0;
