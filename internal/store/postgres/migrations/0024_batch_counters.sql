-- A batch counts its replayed workflows (done) and those whose outcome
-- changed (changed) as they are stored, in the transaction that stores
-- them, so that its progress is one row to read however large the batch:
-- its event stream reads it on every change. Batches stored before count
-- from their items here.
ALTER TABLE replay_batches ADD COLUMN done integer NOT NULL DEFAULT 0;
ALTER TABLE replay_batches ADD COLUMN changed integer NOT NULL DEFAULT 0;
UPDATE replay_batches b SET done = c.done, changed = c.changed
FROM (SELECT batch_id, count(*) AS done, count(*) FILTER (WHERE original_outcome <> replay_outcome) AS changed
	FROM replay_batch_items WHERE replay_id IS NOT NULL GROUP BY batch_id) c
WHERE c.batch_id = b.id;
