-- Batch replays (regression runs). A batch lists its workflows in
-- replay_batch_items, in order, when it is created; an item gets its
-- replay_id (and the replay's outcome and delta, for the batch's counts) in
-- the transaction that stores the replay, once: a restarted or taken-over
-- batch replays only the items without one. lease_owner and lease_until
-- work as workflows' leases do.
CREATE TABLE replay_batches (
	id          text        NOT NULL PRIMARY KEY,
	tenant      text        NOT NULL,
	target      text        NOT NULL,
	status      text        NOT NULL,
	error       text        NOT NULL DEFAULT '',
	total       integer     NOT NULL,
	creator     json        NOT NULL,
	created_at  timestamptz NOT NULL,
	finished_at timestamptz,
	lease_owner text        NOT NULL DEFAULT '',
	lease_until timestamptz NOT NULL DEFAULT '-infinity'
);
CREATE INDEX replay_batches_running ON replay_batches (status, lease_until);

CREATE TABLE replay_batch_items (
	batch_id           text    NOT NULL,
	position           integer NOT NULL,
	workflow_id        text    NOT NULL,
	replay_id          text,
	original_outcome   text    NOT NULL DEFAULT '',
	replay_outcome     text    NOT NULL DEFAULT '',
	changed            boolean NOT NULL DEFAULT false,
	steps_added        integer NOT NULL DEFAULT 0,
	steps_changed      integer NOT NULL DEFAULT 0,
	steps_removed      integer NOT NULL DEFAULT 0,
	tool_calls_changed integer NOT NULL DEFAULT 0,
	PRIMARY KEY (batch_id, position)
);
