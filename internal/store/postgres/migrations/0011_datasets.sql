-- Datasets, and the checks of replay batches (SPEC §4 "What-if replay,
-- datasets and checks"). A dataset version is immutable: its workflows are
-- dataset_items, in order, each with the dataset's expectation of it (JSON
-- {outcome?, output?}) or NULL. A batch keeps what it checks and gates
-- (spec) and, per item, the dataset's expectation; each stored replay's
-- check results go to replay_batch_checks in the transaction that stores
-- the replay, so a resumed batch keeps its totals. failed_checks counts an
-- item's checks that did not pass, for the report to list those items
-- first.
CREATE TABLE datasets (
	id             text        NOT NULL PRIMARY KEY,
	tenant         text        NOT NULL,
	name           text        NOT NULL,
	version        integer     NOT NULL,
	description    text        NOT NULL DEFAULT '',
	filter         text        NOT NULL DEFAULT '',
	workflow_count integer     NOT NULL,
	creator        json        NOT NULL,
	created_at     timestamptz NOT NULL,
	UNIQUE (tenant, name, version)
);

CREATE TABLE dataset_items (
	dataset_id  text    NOT NULL,
	position    integer NOT NULL,
	workflow_id text    NOT NULL,
	expected    text,
	PRIMARY KEY (dataset_id, position)
);

ALTER TABLE replay_batches ADD COLUMN spec text NOT NULL DEFAULT '{}';
ALTER TABLE replay_batches ADD COLUMN dataset text NOT NULL DEFAULT '';
ALTER TABLE replay_batch_items ADD COLUMN expected text;
ALTER TABLE replay_batch_items ADD COLUMN failed_checks integer NOT NULL DEFAULT 0;

CREATE TABLE replay_batch_checks (
	batch_id text    NOT NULL,
	position integer NOT NULL,
	name     text    NOT NULL,
	result   text    NOT NULL,
	PRIMARY KEY (batch_id, position, name)
);
