-- A guarded redrive: up to 500 open dead letters chosen on /dead-letters,
-- each replayed through the single replay (its own verdict, compare-and-set
-- and audit row) at a paced rate, until done or stopped.
CREATE TABLE redrives (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    -- The form's action id: resubmitting it starts nothing new.
    action_id   TEXT NOT NULL UNIQUE,
    actor       TEXT NOT NULL,
    actor_role  TEXT NOT NULL,
    -- The list's filter it was started from, in words.
    selection   TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('running', 'stopped', 'finished')),
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    ended_by    TEXT,
    -- The summary audit row that ties the items' replays together.
    audit_id    INTEGER NOT NULL
);
CREATE INDEX redrives_running ON redrives (id) WHERE state = 'running';

CREATE TABLE redrive_items (
    redrive_id     INTEGER NOT NULL REFERENCES redrives (id),
    position       INTEGER NOT NULL,
    dead_letter_id INTEGER NOT NULL,
    -- NULL until its turn; then replayed, or skipped with the reason.
    outcome        TEXT CHECK (outcome IN ('replayed', 'skipped')),
    reason         TEXT,
    audit_id       INTEGER,
    done_at        INTEGER,
    PRIMARY KEY (redrive_id, position)
);
