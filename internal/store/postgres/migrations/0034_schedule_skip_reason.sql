-- Why a due time was claimed without a workflow (overlap, a pause, an
-- invocation refused), so that a schedule can say why its latest skipped
-- due time started nothing. Empty for a run and for older skips.
ALTER TABLE schedule_runs ADD COLUMN reason text NOT NULL DEFAULT '';
