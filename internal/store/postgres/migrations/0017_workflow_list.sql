-- The console's workflow list at scale (SPEC §4 "Console"): every filter it
-- offers walks an index newest first.
--
-- Words of the goal (q=) stay ILIKE substrings; a pg_trgm GIN index on the
-- goal serves them. pg_trgm ships with PostgreSQL and is a trusted
-- extension (any role with CREATE on the database may install it); where it
-- cannot be installed the migration still succeeds without the index, the
-- filter gives the same answers by reading rows, and a notice says so.
DO $$
BEGIN
	CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'pg_trgm is not available (%): the goal-words filter of the workflow list reads rows instead of an index', SQLERRM;
END
$$;
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
		-- The operator class is looked up where the extension was installed.
		EXECUTE format('CREATE INDEX workflows_goal_trgm ON workflows USING gin (goal %I.gin_trgm_ops)',
			(SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'));
	END IF;
END
$$;

-- The version filter (agent and version) and the outcome filter.
CREATE INDEX workflows_agent_version ON workflows (tenant, agent, agent_version, id);
CREATE INDEX workflows_outcome ON workflows (tenant, outcome, id);
