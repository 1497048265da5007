-- A batch counts its replayed workflows (done) and those whose outcome
-- changed (changed) as they are stored, in the transaction that stores
-- them, so that its progress is one row to read however large the batch:
-- its event stream reads it on every change. Batches stored before count
-- from their items here.
ALTER TABLE replay_batches ADD COLUMN done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_batches ADD COLUMN changed INTEGER NOT NULL DEFAULT 0;
UPDATE replay_batches SET
	done = (SELECT count(*) FROM replay_batch_items i
		WHERE i.batch_id = replay_batches.id AND i.replay_id IS NOT NULL),
	changed = (SELECT count(*) FROM replay_batch_items i
		WHERE i.batch_id = replay_batches.id AND i.replay_id IS NOT NULL AND i.original_outcome <> i.replay_outcome);
