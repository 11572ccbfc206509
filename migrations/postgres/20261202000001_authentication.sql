-- Authentication: sessions end when a user's standing changes, and failed
-- sign-ins are remembered (in the database, so every replica sees them).

-- Bumped when a user is disabled, changes role or gets a new password: every
-- session carries the epoch it was created under and dies when it differs.
ALTER TABLE users ADD COLUMN session_epoch BIGINT NOT NULL DEFAULT 0;

CREATE TABLE login_failures (
    id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- 'account:<name>' or 'address:<ip>'
    subject           TEXT NOT NULL,
    at                TIMESTAMPTZ NOT NULL
);
CREATE INDEX login_failures_by_subject ON login_failures (subject, at);
