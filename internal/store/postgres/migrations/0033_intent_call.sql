-- The call an external agent's intent is for (SPEC §4 "External agents",
-- "Durable by journal"): the digest of its tool, operation and canonical
-- masked arguments, so that a new attempt refuses only that call as
-- interrupted. Empty for a defined agent's intents and older ones.
ALTER TABLE workflow_intents ADD COLUMN call_digest text NOT NULL DEFAULT '';
