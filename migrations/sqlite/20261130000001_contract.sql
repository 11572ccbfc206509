-- Idem's data contract, version 1 (SQLite). The Postgres migration of the
-- same version creates the same tables; differences are only of type:
-- timestamps are INTEGER microseconds since the Unix epoch (UTC), booleans
-- are INTEGER 0/1, and TEXT already compares byte for byte (BINARY).

CREATE TABLE claims (
    consumer          TEXT NOT NULL,
    idempotency_key   TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'failed', 'unknown')),
    status_at         INTEGER NOT NULL,
    first_delivery_at INTEGER NOT NULL,
    last_delivery_at  INTEGER NOT NULL,
    delivery_count    INTEGER NOT NULL DEFAULT 1 CHECK (delivery_count >= 1),
    duplicate_count   INTEGER NOT NULL DEFAULT 0 CHECK (duplicate_count >= 0),
    attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    provider_ref      TEXT,
    last_error        TEXT,
    outcome_at        INTEGER,
    payload_hash      TEXT,
    last_payload_hash TEXT,
    lease_until       INTEGER,
    version           INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (consumer, idempotency_key),
    CHECK (length(CAST(idempotency_key AS BLOB)) BETWEEN 1 AND 512),
    CHECK (length(CAST(consumer AS BLOB)) BETWEEN 1 AND 128)
) WITHOUT ROWID;
CREATE INDEX claims_by_key ON claims (idempotency_key);
CREATE INDEX claims_unknown_since ON claims (status_at, consumer, idempotency_key) WHERE status = 'unknown';
CREATE INDEX claims_pending_since ON claims (status_at, consumer, idempotency_key) WHERE status = 'pending';
CREATE INDEX claims_failed_since ON claims (status_at, consumer, idempotency_key) WHERE status = 'failed';
CREATE INDEX claims_by_activity ON claims (last_delivery_at, consumer, idempotency_key);

CREATE TABLE dead_letters (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer          TEXT NOT NULL,
    queue             TEXT NOT NULL,
    idempotency_key   TEXT NOT NULL,
    message_id        TEXT NOT NULL,
    payload           TEXT NOT NULL,
    delivery_count    INTEGER NOT NULL CHECK (delivery_count >= 1),
    first_failure_at  INTEGER NOT NULL,
    dead_lettered_at  INTEGER NOT NULL,
    last_error        TEXT,
    state             TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'replayed', 'discarded')),
    resolved_by       TEXT,
    resolved_at       INTEGER,
    replay_outbox_id  INTEGER REFERENCES outbox (id)
);
CREATE INDEX dead_letters_open ON dead_letters (dead_lettered_at, id) WHERE state = 'open';
CREATE INDEX dead_letters_by_state ON dead_letters (state, dead_lettered_at, id);
CREATE INDEX dead_letters_by_key ON dead_letters (consumer, idempotency_key, dead_lettered_at);

CREATE TABLE audit_log (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id         TEXT UNIQUE,
    at                INTEGER NOT NULL,
    actor             TEXT NOT NULL,
    actor_role        TEXT NOT NULL,
    action            TEXT NOT NULL,
    consumer          TEXT,
    idempotency_key   TEXT,
    target            TEXT,
    state_before      TEXT,
    state_after       TEXT,
    reason            TEXT,
    result            TEXT NOT NULL,
    client_addr       TEXT,
    recovery_seconds  REAL
);
CREATE INDEX audit_log_by_time ON audit_log (at, id);
CREATE INDEX audit_log_by_key ON audit_log (consumer, idempotency_key, at);
CREATE INDEX audit_log_by_actor ON audit_log (actor, at);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

CREATE TABLE outbox (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer          TEXT NOT NULL,
    topic             TEXT NOT NULL,
    idempotency_key   TEXT NOT NULL,
    payload           TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    published_at      INTEGER,
    attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error        TEXT,
    origin            TEXT NOT NULL DEFAULT 'application'
                      CHECK (origin IN ('application', 'replay', 'resolution')),
    dead_letter_id    INTEGER REFERENCES dead_letters (id),
    audit_id          INTEGER REFERENCES audit_log (id)
);
CREATE INDEX outbox_unpublished ON outbox (created_at, id) WHERE published_at IS NULL;
CREATE INDEX outbox_by_key ON outbox (consumer, idempotency_key, created_at);

CREATE TABLE consumer_metrics (
    consumer          TEXT NOT NULL,
    metric            TEXT NOT NULL,
    minute            INTEGER NOT NULL,
    bucket            TEXT NOT NULL DEFAULT '',
    value             REAL NOT NULL,
    PRIMARY KEY (consumer, metric, minute, bucket)
) WITHOUT ROWID;
CREATE INDEX consumer_metrics_by_time ON consumer_metrics (metric, minute);

CREATE TABLE users (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    username          TEXT NOT NULL UNIQUE,
    role              TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash     TEXT,
    disabled          INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);

-- tower-sessions' table, exactly as tower-sessions-sqlx-store's SqliteStore
-- declares it (that store writes expiry_date itself).
CREATE TABLE sessions (
    id                TEXT PRIMARY KEY NOT NULL,
    data              BLOB NOT NULL,
    expiry_date       INTEGER NOT NULL
);
CREATE INDEX sessions_by_expiry ON sessions (expiry_date);

CREATE TABLE idem_meta (
    name              TEXT PRIMARY KEY,
    value             TEXT NOT NULL
);
