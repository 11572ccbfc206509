-- Authentication: sessions end when a user's standing changes, and failed
-- sign-ins are remembered (in the database, so every replica sees them).

ALTER TABLE users ADD COLUMN session_epoch INTEGER NOT NULL DEFAULT 0;

CREATE TABLE login_failures (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    subject           TEXT NOT NULL,
    at                INTEGER NOT NULL
);
CREATE INDEX login_failures_by_subject ON login_failures (subject, at);
