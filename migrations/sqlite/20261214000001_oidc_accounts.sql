-- Accounts created on first sign-in through OpenID Connect (see the
-- Postgres migration of the same name). SQLite cannot change a CHECK
-- constraint in place, so the users table is rebuilt with the same rows and
-- ids; no table refers to users by a foreign key (sessions hold the id in
-- their data, login_devices the name).
CREATE TABLE users_with_subject (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    username          TEXT NOT NULL UNIQUE,
    role              TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash     TEXT,
    disabled          INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    session_epoch     INTEGER NOT NULL DEFAULT 0,
    origin            TEXT NOT NULL DEFAULT 'password'
                      CHECK (origin IN ('password', 'proxy', 'oidc')),
    subject           TEXT
);
INSERT INTO users_with_subject
    (id, username, role, password_hash, disabled, created_at, updated_at, session_epoch, origin)
    SELECT id, username, role, password_hash, disabled, created_at, updated_at, session_epoch, origin
    FROM users;
-- Ids are never reused: a session of a deleted account must not match a
-- new one, so the counter carries over.
DELETE FROM sqlite_sequence WHERE name = 'users_with_subject';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'users_with_subject', seq FROM sqlite_sequence WHERE name = 'users';
DROP TABLE users;
ALTER TABLE users_with_subject RENAME TO users;
CREATE UNIQUE INDEX users_by_subject ON users (subject) WHERE subject IS NOT NULL;
