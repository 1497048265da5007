-- A step says whether its tool call was really sent to the tool (only a
-- sent call's answer is served again by replay). Steps recorded before knew
-- no such thing; a tool step that ended ok or in error and shows a sign of
-- the call (an attempt, a response status or the request) was sent. The
-- step's completion, never written, goes: LLM exchanges are recorded in
-- workflow_completions.
ALTER TABLE workflow_steps ADD COLUMN sent boolean NOT NULL DEFAULT false;
UPDATE workflow_steps SET sent = true
	WHERE tool <> '' AND status IN ('ok', 'error')
		AND (attempts > 0 OR http_status > 0 OR request IS NOT NULL);
ALTER TABLE workflow_steps DROP COLUMN completion;

-- Replay results. data is the replay as JSON (replay.Replay), without its
-- tenant and creator, which have their columns; ids are ULIDs, so id order
-- is creation order.
CREATE TABLE replays (
	id          text        NOT NULL PRIMARY KEY,
	tenant      text        NOT NULL,
	workflow_id text        NOT NULL,
	target      text        NOT NULL,
	created_at  timestamptz NOT NULL,
	creator     json        NOT NULL,
	data        json        NOT NULL
);
CREATE INDEX replays_tenant ON replays (tenant, id);
CREATE INDEX replays_workflow ON replays (tenant, workflow_id, id);
