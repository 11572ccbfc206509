-- Recoveries (replays and resolutions, with the time they took) in time
-- order: the audit page's "recoveries only" list and the recovery-time
-- chart read this range instead of the whole log.
CREATE INDEX audit_log_recoveries ON audit_log (at, id) WHERE recovery_seconds IS NOT NULL;
