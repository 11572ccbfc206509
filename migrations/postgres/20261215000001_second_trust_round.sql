-- Trust, second round.
--
-- A redrive replays what its page offered, acts with its starter's current
-- rights, and its start and stop are bound to their forms' action ids.
-- `offer`: the start form's token (how many letters, the last one, a
-- digest of their ids), so the same action id with another selection is
-- refused. `starter_epoch`: the starter's session epoch when it started; a
-- run whose starter is disabled, demoted or signed out everywhere stops.
-- `end_reason`: why a run stopped when no person stopped it.
ALTER TABLE redrives ADD COLUMN offer TEXT NOT NULL DEFAULT '';
ALTER TABLE redrives ADD COLUMN starter_epoch BIGINT;
ALTER TABLE redrives ADD COLUMN end_reason TEXT;
