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

-- audit_append seals and inserts records where the chain heads are: it
-- locks every tenant's head in name order (creating a genesis head for a
-- new tenant), chains the records of each tenant in the order given, moves
-- the heads and returns each record's seq, prev_hash and hash. The records
-- come sorted by tenant, each as its canonical JSON cut around prev_hash
-- and seq (audit.Parts): hash = hex(SHA-256(prev ‖ before_prev ‖ prev ‖
-- before_seq ‖ seq ‖ after_seq)). A write transaction calls it last, in the
-- round trip that commits, so a head stays locked only for the end of that
-- transaction.
CREATE FUNCTION audit_append(
	p_id text[], p_tenant text[], p_time timestamptz[], p_actor_sub text[], p_actor_client_id text[],
	p_action text[], p_resource_type text[], p_resource_id text[], p_outcome text[], p_status integer[],
	p_request_id text[], p_trace_id text[], p_workflow_id text[], p_details text[],
	p_before_prev bytea[], p_before_seq bytea[], p_after_seq bytea[])
RETURNS TABLE (r_seq bigint, r_prev text, r_hash text)
LANGUAGE plpgsql AS $$
DECLARE
	n       int      := coalesce(array_length(p_id, 1), 0);
	tenants text[]   := ARRAY(SELECT DISTINCT t FROM unnest(p_tenant) AS t);
	seqs    bigint[] := '{}';
	prevs   text[]   := '{}';
	hashes  text[]   := '{}';
	ht      text[];
	hs      bigint[];
	hh      text[];
	k       int;
	prev    bytea;
BEGIN
	IF n = 0 THEN
		RETURN;
	END IF;
	-- Lock the heads in name order, reading them as they are locked.
	SELECT array_agg(h.tenant), array_agg(h.seq), array_agg(h.hash) INTO ht, hs, hh
		FROM (SELECT tenant, seq, hash FROM audit_heads WHERE tenant = ANY (tenants)
			ORDER BY tenant FOR UPDATE) AS h;
	IF coalesce(array_length(ht, 1), 0) < array_length(tenants, 1) THEN
		-- A tenant's first record: its genesis head, then lock them all again.
		INSERT INTO audit_heads (tenant, seq, hash)
			SELECT t, 0, repeat('0', 64) FROM unnest(tenants) AS t ORDER BY 1
			ON CONFLICT (tenant) DO NOTHING;
		SELECT array_agg(h.tenant), array_agg(h.seq), array_agg(h.hash) INTO ht, hs, hh
			FROM (SELECT tenant, seq, hash FROM audit_heads WHERE tenant = ANY (tenants)
				ORDER BY tenant FOR UPDATE) AS h;
	END IF;
	FOR i IN 1..n LOOP
		IF i = 1 OR p_tenant[i] <> p_tenant[i - 1] THEN
			k := array_position(ht, p_tenant[i]);
		END IF;
		prevs[i] := hh[k];
		prev := convert_to(hh[k], 'UTF8');
		hs[k] := hs[k] + 1;
		hh[k] := encode(sha256(prev || p_before_prev[i] || prev || p_before_seq[i]
			|| convert_to(hs[k]::text, 'UTF8') || p_after_seq[i]), 'hex');
		seqs[i] := hs[k];
		hashes[i] := hh[k];
	END LOOP;
	UPDATE audit_heads AS h SET seq = v.seq, hash = v.hash
		FROM unnest(ht, hs, hh) AS v(tenant, seq, hash) WHERE h.tenant = v.tenant;
	INSERT INTO audit_records (id, tenant, seq, time, actor_sub, actor_client_id, action, resource_type,
		resource_id, outcome, status, request_id, trace_id, workflow_id, details, prev_hash, hash)
		SELECT * FROM unnest(p_id, p_tenant, seqs, p_time, p_actor_sub, p_actor_client_id, p_action,
			p_resource_type, p_resource_id, p_outcome, p_status, p_request_id, p_trace_id, p_workflow_id,
			p_details, prevs, hashes);
	RETURN QUERY SELECT * FROM unnest(seqs, prevs, hashes);
END
$$;

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
