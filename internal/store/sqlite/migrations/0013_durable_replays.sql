-- A real replay (dry_run false) is stored running before its new workflow
-- starts, naming that workflow, and completed by whichever replica finishes
-- it (SPEC §4 "Asynchronous invocations"). Dry runs are stored completed.
-- status mirrors the status in data, for finding the replays left running;
-- replay_workflow_id finds the replay of a workflow that finished.
ALTER TABLE replays ADD COLUMN status TEXT NOT NULL DEFAULT 'completed';
ALTER TABLE replays ADD COLUMN replay_workflow_id TEXT NOT NULL DEFAULT '';
CREATE INDEX replays_running ON replays (id) WHERE status = 'running';
CREATE INDEX replays_replay_workflow ON replays (replay_workflow_id) WHERE replay_workflow_id <> '';
