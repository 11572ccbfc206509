-- Trust, second round (see the Postgres migration of the same version).
ALTER TABLE redrives ADD COLUMN offer TEXT NOT NULL DEFAULT '';
ALTER TABLE redrives ADD COLUMN starter_epoch INTEGER;
ALTER TABLE redrives ADD COLUMN end_reason TEXT;

ALTER TABLE key_fingerprints ADD COLUMN last_logged_at INTEGER NOT NULL DEFAULT 0;
UPDATE key_fingerprints SET last_logged_at = first_logged_at;
CREATE INDEX key_fingerprints_by_last_logged ON key_fingerprints (last_logged_at);

CREATE TABLE refusal_counts (
    actor         TEXT NOT NULL,
    actor_role    TEXT NOT NULL,
    reason        TEXT NOT NULL,
    window_start  INTEGER NOT NULL,
    refused       INTEGER NOT NULL CHECK (refused > 0),
    first_target  TEXT NOT NULL,
    client_addr   TEXT,
    PRIMARY KEY (actor, reason, window_start)
) WITHOUT ROWID;
CREATE INDEX refusal_counts_by_window ON refusal_counts (window_start);
