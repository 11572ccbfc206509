-- Bulk discard and bulk resolve on the redrive's machinery (see the
-- Postgres migration of the same version). SQLite cannot drop a NOT NULL
-- or change a CHECK in place, so redrive_items is rebuilt.
ALTER TABLE redrives ADD COLUMN kind TEXT NOT NULL DEFAULT 'replay'
    CHECK (kind IN ('replay', 'discard', 'resolve'));
ALTER TABLE redrives ADD COLUMN resolve_as TEXT
    CHECK (resolve_as IN ('sent', 'failed-retry', 'failed'));
ALTER TABLE redrives ADD COLUMN reason TEXT;

CREATE TABLE redrive_items_rebuilt (
    redrive_id      INTEGER NOT NULL REFERENCES redrives (id),
    position        INTEGER NOT NULL,
    -- Replay and discard: the dead letter; resolve: NULL.
    dead_letter_id  INTEGER,
    consumer        TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    -- Resolve: the claim version the starter saw, and the reference to
    -- record as sent.
    version         INTEGER,
    provider_ref    TEXT,
    outcome         TEXT CHECK (outcome IN ('replayed', 'skipped', 'discarded', 'resolved')),
    reason          TEXT,
    audit_id        INTEGER,
    done_at         INTEGER,
    PRIMARY KEY (redrive_id, position)
);
INSERT INTO redrive_items_rebuilt (redrive_id, position, dead_letter_id, consumer,
    idempotency_key, outcome, reason, audit_id, done_at)
SELECT i.redrive_id, i.position, i.dead_letter_id, COALESCE(d.consumer, ''),
    COALESCE(d.idempotency_key, ''), i.outcome, i.reason, i.audit_id, i.done_at
FROM redrive_items i LEFT JOIN dead_letters d ON d.id = i.dead_letter_id;
DROP TABLE redrive_items;
ALTER TABLE redrive_items_rebuilt RENAME TO redrive_items;
