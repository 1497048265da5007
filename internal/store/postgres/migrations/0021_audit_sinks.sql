-- Audit sinks (--audit-sink): one replica at a time pushes a sink, under
-- its lease, and each sink's cursor says, per tenant chain, the last seq the
-- sink took, so pushing resumes there after a restart.
CREATE TABLE audit_sinks (
	sink        text        NOT NULL PRIMARY KEY,
	owner       text        NOT NULL,
	lease_until timestamptz NOT NULL
);

CREATE TABLE audit_sink_cursors (
	sink       text        NOT NULL,
	tenant     text        NOT NULL,
	seq        bigint      NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (sink, tenant)
);
