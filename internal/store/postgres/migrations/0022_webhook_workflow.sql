-- A webhook may receive the events of one workflow only: an A2A task's
-- push-notification config (docs/a2a.md). '' receives every workflow's.
ALTER TABLE webhooks ADD COLUMN workflow_id text NOT NULL DEFAULT '';
