-- A model's http2_prior_knowledge (SPEC §4 "Models and LLM agents"): 1 when
-- its requests to an http:// base_url speak HTTP/2 without TLS (h2c).
ALTER TABLE models ADD COLUMN http2_prior_knowledge INTEGER NOT NULL DEFAULT 0;
