-- Audit sinks (--audit-sink): one replica at a time pushes a sink, under
-- its lease, and each sink's cursor says, per tenant chain, the last seq the
-- sink took, so pushing resumes there after a restart.
CREATE TABLE audit_sinks (
	sink        TEXT NOT NULL PRIMARY KEY,
	owner       TEXT NOT NULL,
	lease_until TEXT NOT NULL
);

CREATE TABLE audit_sink_cursors (
	sink       TEXT    NOT NULL,
	tenant     TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	updated_at TEXT    NOT NULL,
	PRIMARY KEY (sink, tenant)
) WITHOUT ROWID;
