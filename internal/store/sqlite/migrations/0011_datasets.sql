-- Datasets, and the checks of replay batches (SPEC §4 "What-if replay,
-- datasets and checks"). A dataset version is immutable: its workflows are
-- dataset_items, in order, each with the dataset's expectation of it (JSON
-- {outcome?, output?}) or NULL. A batch keeps what it checks and gates
-- (spec, JSON) and, per item, the dataset's expectation; each stored
-- replay's check results go to replay_batch_checks in the transaction that
-- stores the replay, so a resumed batch keeps its totals. failed_checks
-- counts an item's checks that did not pass, for the report to list those
-- items first.
CREATE TABLE datasets (
	id             TEXT    NOT NULL PRIMARY KEY,
	tenant         TEXT    NOT NULL,
	name           TEXT    NOT NULL,
	version        INTEGER NOT NULL,
	description    TEXT    NOT NULL DEFAULT '',
	filter         TEXT    NOT NULL DEFAULT '',
	workflow_count INTEGER NOT NULL,
	creator        TEXT    NOT NULL,
	created_at     TEXT    NOT NULL,
	UNIQUE (tenant, name, version)
);

CREATE TABLE dataset_items (
	dataset_id  TEXT    NOT NULL,
	position    INTEGER NOT NULL,
	workflow_id TEXT    NOT NULL,
	expected    TEXT,
	PRIMARY KEY (dataset_id, position)
) WITHOUT ROWID;

ALTER TABLE replay_batches ADD COLUMN spec TEXT NOT NULL DEFAULT '{}';
ALTER TABLE replay_batches ADD COLUMN dataset TEXT NOT NULL DEFAULT '';
ALTER TABLE replay_batch_items ADD COLUMN expected TEXT;
ALTER TABLE replay_batch_items ADD COLUMN failed_checks INTEGER NOT NULL DEFAULT 0;

CREATE TABLE replay_batch_checks (
	batch_id TEXT    NOT NULL,
	position INTEGER NOT NULL,
	name     TEXT    NOT NULL,
	result   TEXT    NOT NULL,
	PRIMARY KEY (batch_id, position, name)
) WITHOUT ROWID;
