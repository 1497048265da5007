-- Retention (SPEC §4 "Data lifecycle and governance"): the sweep finds
-- finished workflows by when they finished, and deletes what refers to
-- each by its id; these indexes keep every one of those deletes a seek.
CREATE INDEX workflows_finished ON workflows (finished_at) WHERE status NOT IN ('running', 'waiting');
CREATE INDEX idempotency_entries_workflow ON idempotency_entries (workflow_id) WHERE workflow_id <> '';
CREATE INDEX replay_batch_items_workflow ON replay_batch_items (workflow_id);
CREATE INDEX replay_batch_journal_workflow ON replay_batch_journal (workflow_id);
CREATE INDEX dataset_items_workflow ON dataset_items (workflow_id);
-- A workflow's webhook deliveries carry its id as their order key.
CREATE INDEX webhook_deliveries_workflow ON webhook_deliveries (order_key) WHERE order_key <> '';
CREATE INDEX replays_workflow_id ON replays (workflow_id);
CREATE INDEX workflows_replay_of ON workflows (replay_of) WHERE replay_of <> '';

-- Named leases of work one replica does at a time (the retention sweep).
CREATE TABLE service_leases (
	name  text        NOT NULL PRIMARY KEY,
	owner text        NOT NULL,
	until timestamptz NOT NULL
);
