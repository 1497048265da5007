-- Why a schedule was paused when agentplane paused it ('' when a person
-- did, or it runs): a schedule whose creator's client was revoked is
-- paused rather than run with scopes nobody holds any more.
ALTER TABLE schedules ADD COLUMN paused_reason text NOT NULL DEFAULT '';
