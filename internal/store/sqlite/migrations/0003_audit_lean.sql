-- Fewer B-trees written per audit record. Records are found by (tenant,
-- seq), never by id, so id loses its unique index (ids are ULIDs, unique as
-- made). The writer keeps each chain's head in memory (checked against
-- other connections' commits with PRAGMA data_version), reading it from the
-- records on a miss, so audit_heads goes. New records land in audit_tail,
-- keyed by (tenant, seq) alone (which also refuses a forked chain), and
-- the writer moves them to audit_records and its indexes a few hundred at
-- a time; reads look at both tables.
CREATE TABLE audit_records_lean (
	id               TEXT    NOT NULL,
	tenant           TEXT    NOT NULL,
	seq              INTEGER NOT NULL,
	time             TEXT    NOT NULL,
	actor_sub        TEXT    NOT NULL,
	actor_client_id  TEXT    NOT NULL,
	action           TEXT    NOT NULL,
	resource_type    TEXT    NOT NULL,
	resource_id      TEXT    NOT NULL,
	outcome          TEXT    NOT NULL,
	status           INTEGER NOT NULL,
	request_id       TEXT    NOT NULL,
	trace_id         TEXT    NOT NULL,
	workflow_id      TEXT    NOT NULL,
	details          TEXT    NOT NULL,
	prev_hash        TEXT    NOT NULL,
	hash             TEXT    NOT NULL,
	UNIQUE (tenant, seq)
);
INSERT INTO audit_records_lean SELECT id, tenant, seq, time, actor_sub, actor_client_id, action,
	resource_type, resource_id, outcome, status, request_id, trace_id, workflow_id, details,
	prev_hash, hash FROM audit_records ORDER BY tenant, seq;
DROP TABLE audit_records;
ALTER TABLE audit_records_lean RENAME TO audit_records;
CREATE INDEX audit_records_actor_sub ON audit_records (tenant, actor_sub, seq);
CREATE INDEX audit_records_actor_client ON audit_records (tenant, actor_client_id, seq);
CREATE INDEX audit_records_action ON audit_records (tenant, action, seq);
CREATE INDEX audit_records_resource ON audit_records (tenant, resource_type, resource_id, seq);
CREATE INDEX audit_records_workflow ON audit_records (tenant, workflow_id, seq);
CREATE INDEX audit_records_outcome ON audit_records (tenant, outcome, seq);
CREATE INDEX audit_records_trace ON audit_records (tenant, trace_id, seq);
CREATE INDEX audit_records_time ON audit_records (tenant, time, seq);
DROP TABLE audit_heads;

CREATE TABLE audit_tail (
	id               TEXT    NOT NULL,
	tenant           TEXT    NOT NULL,
	seq              INTEGER NOT NULL,
	time             TEXT    NOT NULL,
	actor_sub        TEXT    NOT NULL,
	actor_client_id  TEXT    NOT NULL,
	action           TEXT    NOT NULL,
	resource_type    TEXT    NOT NULL,
	resource_id      TEXT    NOT NULL,
	outcome          TEXT    NOT NULL,
	status           INTEGER NOT NULL,
	request_id       TEXT    NOT NULL,
	trace_id         TEXT    NOT NULL,
	workflow_id      TEXT    NOT NULL,
	details          TEXT    NOT NULL,
	prev_hash        TEXT    NOT NULL,
	hash             TEXT    NOT NULL,
	PRIMARY KEY (tenant, seq)
) WITHOUT ROWID;
