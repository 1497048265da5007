-- External agent versions (SPEC §4 "External agents"): an agent version
-- that is an HTTP endpoint keeps its block in external and no definition;
-- a defined version keeps its definition and no external. A step of an
-- external agent names the attempt that made it (0 for a defined agent's
-- steps) and, when it went live after differing from the run's record,
-- its journal state. external is json, as definition is, so that the
-- block (its inputs schema among it) reads back as it was written.
ALTER TABLE agent_versions ALTER COLUMN definition DROP NOT NULL;
ALTER TABLE agent_versions ADD COLUMN external json;
ALTER TABLE workflow_steps ADD COLUMN attempt integer NOT NULL DEFAULT 0;
ALTER TABLE workflow_steps ADD COLUMN journal text NOT NULL DEFAULT '';
