-- The console's workflow list at scale (SPEC §4 "Console"): every filter it
-- offers walks an index newest first.
--
-- Words of the goal (q=) are found through an FTS5 trigram index kept in
-- step with workflows by triggers: a word of three or more characters is a
-- phrase of trigrams, which matches exactly the goals holding it as a
-- substring, in any case. Shorter words are checked with LIKE on the rows
-- the other conditions select.
CREATE VIRTUAL TABLE workflow_goals USING fts5(goal, content = 'workflows', tokenize = 'trigram');
CREATE TRIGGER workflow_goals_insert AFTER INSERT ON workflows BEGIN
	INSERT INTO workflow_goals (rowid, goal) VALUES (new.rowid, new.goal);
END;
CREATE TRIGGER workflow_goals_delete AFTER DELETE ON workflows BEGIN
	INSERT INTO workflow_goals (workflow_goals, rowid, goal) VALUES ('delete', old.rowid, old.goal);
END;
CREATE TRIGGER workflow_goals_update AFTER UPDATE OF goal ON workflows BEGIN
	INSERT INTO workflow_goals (workflow_goals, rowid, goal) VALUES ('delete', old.rowid, old.goal);
	INSERT INTO workflow_goals (rowid, goal) VALUES (new.rowid, new.goal);
END;
-- The workflows stored before this migration.
INSERT INTO workflow_goals (workflow_goals) VALUES ('rebuild');

-- The version filter (agent and version) and the outcome filter.
CREATE INDEX workflows_agent_version ON workflows (tenant, agent, agent_version, id);
CREATE INDEX workflows_outcome ON workflows (tenant, outcome, id);
