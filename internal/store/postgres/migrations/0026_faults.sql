-- Fault injection in replays (SPEC §4 "Change safety"): a real replay's
-- workflow keeps the faults it injects (NULL for none), so a resumed run
-- injects the same; a step a fault answered keeps what was injected (NULL
-- for every other step). json, as external is, so the faults (their
-- bodies among them) read back as they were written.
ALTER TABLE workflows ADD COLUMN faults json;
ALTER TABLE workflow_steps ADD COLUMN injected json;
