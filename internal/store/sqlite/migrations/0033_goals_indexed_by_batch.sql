-- Workflow goals are indexed by the writer once a batch (goals.go), in one
-- statement after the batch's writes: through this trigger each goal was
-- written inside its write's savepoint, which made FTS5 flush it to disk
-- as a segment of its own. Deleting a workflow still removes its goal
-- here (workflow_goals_delete): a workflow is deleted only once finished,
-- after the batch that created it has committed, so its goal is indexed by
-- then.
DROP TRIGGER workflow_goals_insert;
