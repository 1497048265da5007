-- External agent versions (SPEC §4 "External agents"): an agent version
-- that is an HTTP endpoint keeps its block in external (NULL for a defined
-- version) and '' as its definition. A step of an external agent names the
-- attempt that made it (0 for a defined agent's steps) and, when it went
-- live after differing from the run's record, its journal state.
ALTER TABLE agent_versions ADD COLUMN external TEXT;
ALTER TABLE workflow_steps ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_steps ADD COLUMN journal TEXT NOT NULL DEFAULT '';
