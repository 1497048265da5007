-- An invoke's idempotency key (its principal and key; the tenant is a
-- column) is stored with the workflow it creates, in the transaction that
-- creates it: a repeat finds the workflow by it and attaches (SPEC §4
-- "Asynchronous invocations"). idem_hash identifies the request's body.
ALTER TABLE workflows ADD COLUMN idem_key TEXT;
ALTER TABLE workflows ADD COLUMN idem_hash TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX workflows_idem_key ON workflows (tenant, idem_key) WHERE idem_key IS NOT NULL;
