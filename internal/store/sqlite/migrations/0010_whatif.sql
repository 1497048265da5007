-- What-if replay. A batch keeps how its replays are served (llm,
-- unrecorded_calls) and how many run at once (concurrency, 0: the
-- default). The batch's usage sums that of its replays, read from them.
ALTER TABLE replay_batches ADD COLUMN llm TEXT NOT NULL DEFAULT 'recorded';
ALTER TABLE replay_batches ADD COLUMN unrecorded_calls TEXT NOT NULL DEFAULT 'skip';
ALTER TABLE replay_batches ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 0;

-- The live completions of a batch's replays, journaled as each arrives,
-- keyed by the completion's number and request hash: a batch resumed after
-- a crash serves them again instead of requesting them twice. A batch's
-- rows go when it finishes.
CREATE TABLE replay_batch_journal (
	batch_id       TEXT    NOT NULL,
	workflow_id    TEXT    NOT NULL,
	n              INTEGER NOT NULL,
	request_sha256 TEXT    NOT NULL,
	data           TEXT    NOT NULL,
	PRIMARY KEY (batch_id, workflow_id, n, request_sha256)
) WITHOUT ROWID;
