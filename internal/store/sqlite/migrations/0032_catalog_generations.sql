-- A tenant's catalog generation: bumped, by these triggers, in the same
-- transaction as any change to its agents, versions, tools or rollouts, so a
-- replica may keep what an invocation reads of them (docs/performance.md,
-- "The catalog an invocation reads") for as long as the generation it read
-- them at is the tenant's.
CREATE TABLE catalog_generations (
	tenant     TEXT    NOT NULL PRIMARY KEY,
	generation INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER agents_catalog_insert AFTER INSERT ON agents BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (NEW.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER agents_catalog_update AFTER UPDATE ON agents BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (OLD.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER agents_catalog_delete AFTER DELETE ON agents BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (OLD.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER agent_versions_catalog_insert AFTER INSERT ON agent_versions BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (NEW.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER agent_versions_catalog_update AFTER UPDATE ON agent_versions BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (OLD.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER agent_versions_catalog_delete AFTER DELETE ON agent_versions BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (OLD.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER tools_catalog_insert AFTER INSERT ON tools BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (NEW.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER tools_catalog_update AFTER UPDATE ON tools BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (OLD.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER tools_catalog_delete AFTER DELETE ON tools BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (OLD.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER rollouts_catalog_insert AFTER INSERT ON rollouts BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (NEW.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER rollouts_catalog_update AFTER UPDATE ON rollouts BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (OLD.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;

CREATE TRIGGER rollouts_catalog_delete AFTER DELETE ON rollouts BEGIN
	INSERT INTO catalog_generations (tenant, generation) VALUES (OLD.tenant, 1)
		ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1;
END;
