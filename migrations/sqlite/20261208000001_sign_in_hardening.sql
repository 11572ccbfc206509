-- Sign-in that cannot be turned against the people who use it (see the
-- Postgres migration of the same version for the reasons).

DROP TABLE login_failures;

CREATE TABLE login_failures (
    scope             TEXT NOT NULL CHECK (scope IN ('pair', 'address')),
    account           TEXT NOT NULL,
    client            TEXT NOT NULL,
    window_start      INTEGER NOT NULL,
    failures          INTEGER NOT NULL CHECK (failures >= 0),
    throttled         INTEGER NOT NULL DEFAULT 0 CHECK (throttled >= 0),
    next_check_at     INTEGER,
    PRIMARY KEY (scope, account, client)
);
CREATE INDEX login_failures_by_window ON login_failures (window_start);

CREATE TABLE login_devices (
    username          TEXT NOT NULL,
    -- SHA-256 (hex) of the device cookie's token; the token itself is
    -- only in the browser.
    device            TEXT NOT NULL,
    last_ok_at        INTEGER NOT NULL,
    PRIMARY KEY (username, device)
);
CREATE INDEX login_devices_by_time ON login_devices (last_ok_at);

ALTER TABLE users ADD COLUMN origin TEXT NOT NULL DEFAULT 'password'
    CHECK (origin IN ('password', 'proxy'));
UPDATE users SET origin = 'proxy' WHERE password_hash IS NULL;
