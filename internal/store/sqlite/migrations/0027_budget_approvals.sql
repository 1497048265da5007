-- Budgets that ask (SPEC §4 "Change safety"): an invocation's
-- on_exhausted ('' for the version's limits), and on a spent budget's
-- approval the budget as JSON ({limit, used, allowed, grant}; NULL on any
-- other approval).
ALTER TABLE workflows ADD COLUMN on_exhausted TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_approvals ADD COLUMN budget TEXT;
