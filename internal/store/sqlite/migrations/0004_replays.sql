-- A step says whether its tool call was really sent to the tool (only a
-- sent call's answer is served again by replay). Steps recorded before knew
-- no such thing; a tool step that ended ok or in error and shows a sign of
-- the call (an attempt, a response status or the request) was sent. The
-- step's completion, never written, goes: LLM exchanges are recorded in
-- workflow_completions.
ALTER TABLE workflow_steps ADD COLUMN sent INTEGER NOT NULL DEFAULT 0;
UPDATE workflow_steps SET sent = 1
	WHERE tool <> '' AND status IN ('ok', 'error')
		AND (attempts > 0 OR http_status > 0 OR request IS NOT NULL);
ALTER TABLE workflow_steps DROP COLUMN completion;

-- Replay results. data is the replay as JSON (replay.Replay), without its
-- tenant and creator, which have their columns; ids are ULIDs, so id order
-- is creation order.
CREATE TABLE replays (
	id          TEXT NOT NULL PRIMARY KEY,
	tenant      TEXT NOT NULL,
	workflow_id TEXT NOT NULL,
	target      TEXT NOT NULL,
	created_at  TEXT NOT NULL,
	creator     TEXT NOT NULL,
	data        TEXT NOT NULL
);
CREATE INDEX replays_tenant ON replays (tenant, id);
CREATE INDEX replays_workflow ON replays (tenant, workflow_id, id);
