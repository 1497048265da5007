-- Batch replays (regression runs). A batch lists its workflows in
-- replay_batch_items, in order, when it is created; an item gets its
-- replay_id (and the replay's outcome and delta, for the batch's counts) in
-- the transaction that stores the replay, once: a restarted or taken-over
-- batch replays only the items without one. lease_owner and lease_until
-- work as workflows' leases do.
CREATE TABLE replay_batches (
	id          TEXT NOT NULL PRIMARY KEY,
	tenant      TEXT NOT NULL,
	target      TEXT NOT NULL,
	status      TEXT NOT NULL,
	error       TEXT NOT NULL DEFAULT '',
	total       INTEGER NOT NULL,
	creator     TEXT NOT NULL,
	created_at  TEXT NOT NULL,
	finished_at TEXT,
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_until TEXT NOT NULL DEFAULT ''
);
CREATE INDEX replay_batches_running ON replay_batches (status, lease_until);

CREATE TABLE replay_batch_items (
	batch_id           TEXT NOT NULL,
	position           INTEGER NOT NULL,
	workflow_id        TEXT NOT NULL,
	replay_id          TEXT,
	original_outcome   TEXT NOT NULL DEFAULT '',
	replay_outcome     TEXT NOT NULL DEFAULT '',
	changed            INTEGER NOT NULL DEFAULT 0,
	steps_added        INTEGER NOT NULL DEFAULT 0,
	steps_changed      INTEGER NOT NULL DEFAULT 0,
	steps_removed      INTEGER NOT NULL DEFAULT 0,
	tool_calls_changed INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (batch_id, position)
) WITHOUT ROWID;
