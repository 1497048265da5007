-- A tenant's catalog generation: bumped, by these triggers, in the same
-- transaction as any change to its agents, versions, tools or rollouts, so a
-- replica may keep what an invocation reads of them (docs/performance.md,
-- "The catalog an invocation reads") for as long as the generation it read
-- them at is the tenant's.
CREATE TABLE catalog_generations (
	tenant     text   NOT NULL PRIMARY KEY,
	generation bigint NOT NULL
);

CREATE FUNCTION bump_catalog_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO catalog_generations (tenant, generation)
		VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant ELSE NEW.tenant END, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = catalog_generations.generation + 1;
	RETURN NULL;
END;
$$;

CREATE TRIGGER agents_catalog AFTER INSERT OR UPDATE OR DELETE ON agents
	FOR EACH ROW EXECUTE FUNCTION bump_catalog_generation();

CREATE TRIGGER agent_versions_catalog AFTER INSERT OR UPDATE OR DELETE ON agent_versions
	FOR EACH ROW EXECUTE FUNCTION bump_catalog_generation();

CREATE TRIGGER tools_catalog AFTER INSERT OR UPDATE OR DELETE ON tools
	FOR EACH ROW EXECUTE FUNCTION bump_catalog_generation();

CREATE TRIGGER rollouts_catalog AFTER INSERT OR UPDATE OR DELETE ON rollouts
	FOR EACH ROW EXECUTE FUNCTION bump_catalog_generation();
