-- Sign-in that cannot be turned against the people who use it.
--
-- 1. Failed sign-ins are counted per (account, client address) and per
--    address (an IPv6 client by its /64), in fixed windows: one row per
--    counter, not one per attempt, and no row per name typed from an
--    address over its limit, so a flood of failures costs a bounded number
--    of rows and audit entries. A window that has
--    ended is closed (its row deleted, with one audit row summing it up) by
--    the next attempt or the background sweeper. Attempts refused while
--    throttled are counted apart and never move the window.
-- 2. The browsers an account signed in from (a device cookie): their
--    attempts are counted apart from everyone else's, and the right
--    password gets through after a growing delay instead of being refused
--    for the rest of the window.
-- 3. Where an account comes from: a password account and a person named by
--    the identity proxy never share one row.

DROP TABLE login_failures;

CREATE TABLE login_failures (
    -- 'pair' (account at address) or 'address' (every account, account '').
    scope             TEXT NOT NULL CHECK (scope IN ('pair', 'address')),
    account           TEXT NOT NULL,
    client            TEXT NOT NULL,
    window_start      TIMESTAMPTZ NOT NULL,
    -- Attempts checked against a password hash in this window and not
    -- (yet) successful: reserved before the hash, kept when it fails.
    failures          INTEGER NOT NULL CHECK (failures >= 0),
    -- Attempts refused without a check while over the limit.
    throttled         INTEGER NOT NULL DEFAULT 0 CHECK (throttled >= 0),
    -- A known-good browser over the limit: no check before this.
    next_check_at     TIMESTAMPTZ,
    PRIMARY KEY (scope, account, client)
);
CREATE INDEX login_failures_by_window ON login_failures (window_start);

CREATE TABLE login_devices (
    username          TEXT NOT NULL,
    -- SHA-256 (hex) of the device cookie's token; the token itself is
    -- only in the browser.
    device            TEXT NOT NULL,
    last_ok_at        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (username, device)
);
CREATE INDEX login_devices_by_time ON login_devices (last_ok_at);

ALTER TABLE users ADD COLUMN origin TEXT NOT NULL DEFAULT 'password'
    CHECK (origin IN ('password', 'proxy'));
-- Accounts the identity proxy created have no password.
UPDATE users SET origin = 'proxy' WHERE password_hash IS NULL;
