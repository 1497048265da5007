-- A tool's scheduled refresh (SPEC §4 "Tool drift"): refresh_set is the
-- refresh (a Go duration, kept in limits) the schedule was set for, and
-- refresh_next when the next refresh is due (NULL without one). A replica
-- claims a due refresh by moving refresh_next from the due time it read.
ALTER TABLE tools ADD COLUMN refresh_set text NOT NULL DEFAULT '';
ALTER TABLE tools ADD COLUMN refresh_next timestamptz;
CREATE INDEX tools_refresh_next ON tools (refresh_next) WHERE refresh_next IS NOT NULL;
