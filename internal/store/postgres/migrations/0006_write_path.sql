-- Audit records are found by (tenant, seq); their id, unique by
-- construction (a ULID), needs no index of its own: one index entry, and
-- its WAL record, less per record. (This builds the primary key's index
-- anew: on a large audit log, the migration takes a while.)
ALTER TABLE audit_records DROP CONSTRAINT audit_records_pkey,
	DROP CONSTRAINT audit_records_tenant_seq_key,
	ADD PRIMARY KEY (tenant, seq);

-- Only running workflows are looked up by lease; a finished one leaves
-- the index.
DROP INDEX workflows_lease;
CREATE INDEX workflows_lease ON workflows (lease_until) WHERE status = 'running';

-- require_rows fails the statement (and so the transaction) when n is 0:
-- a write whose statements are sent in one round trip with its COMMIT
-- states in SQL what it needs (a workflow still held under its lease), as
-- a check of the affected rows made afterwards would come after the
-- commit.
CREATE FUNCTION require_rows(n bigint, what text) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
	IF n = 0 THEN
		RAISE EXCEPTION '%', what USING ERRCODE = 'AP001';
	END IF;
	RETURN n;
END
$$;
