-- Trust, second round (see the Postgres migration of the same version).
ALTER TABLE redrives ADD COLUMN offer TEXT NOT NULL DEFAULT '';
ALTER TABLE redrives ADD COLUMN starter_epoch INTEGER;
ALTER TABLE redrives ADD COLUMN end_reason TEXT;
