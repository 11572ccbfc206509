-- Idem's data contract, version 1 (Postgres). docs: ARCHITECTURE.md, DESIGN §2.
-- Keys and consumer names use COLLATE "C": byte order, so equality is
-- byte-exact and a key prefix is a contiguous range of the index.
-- The SQLite migration of the same version creates the same tables.

-- One row per (consumer, idempotency key): the consumer's claim.
CREATE TABLE claims (
    consumer          TEXT COLLATE "C" NOT NULL,
    idempotency_key   TEXT COLLATE "C" NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'failed', 'unknown')),
    -- When status last changed ("unknown since").
    status_at         TIMESTAMPTZ NOT NULL,
    first_delivery_at TIMESTAMPTZ NOT NULL,
    last_delivery_at  TIMESTAMPTZ NOT NULL,
    delivery_count    BIGINT NOT NULL DEFAULT 1 CHECK (delivery_count >= 1),
    duplicate_count   BIGINT NOT NULL DEFAULT 0 CHECK (duplicate_count >= 0),
    attempts          BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    provider_ref      TEXT,
    last_error        TEXT,
    outcome_at        TIMESTAMPTZ,
    payload_hash      TEXT,
    -- The payload hash of a later delivery that differed from the first (drift).
    last_payload_hash TEXT,
    -- Held by a worker during an external call; expiry without an outcome means "unknown".
    lease_until       TIMESTAMPTZ,
    -- Compare-and-set token for operator actions.
    version           BIGINT NOT NULL DEFAULT 1,
    PRIMARY KEY (consumer, idempotency_key),
    CHECK (octet_length(idempotency_key) BETWEEN 1 AND 512),
    CHECK (octet_length(consumer) BETWEEN 1 AND 128)
);
-- Links that carry only the key; prefix search as a range scan.
CREATE INDEX claims_by_key ON claims (idempotency_key);
-- The small states, oldest first, with a keyset tie-break. Partial: they stay
-- small however large the table grows.
CREATE INDEX claims_unknown_since ON claims (status_at, consumer, idempotency_key) WHERE status = 'unknown';
CREATE INDEX claims_pending_since ON claims (status_at, consumer, idempotency_key) WHERE status = 'pending';
CREATE INDEX claims_failed_since ON claims (status_at, consumer, idempotency_key) WHERE status = 'failed';
-- "Newest activity first" for search and browsing.
CREATE INDEX claims_by_activity ON claims (last_delivery_at, consumer, idempotency_key);

-- One row per message given up on.
CREATE TABLE dead_letters (
    id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer          TEXT COLLATE "C" NOT NULL,
    queue             TEXT NOT NULL,
    idempotency_key   TEXT COLLATE "C" NOT NULL,
    message_id        TEXT NOT NULL,
    payload           TEXT NOT NULL,
    delivery_count    BIGINT NOT NULL CHECK (delivery_count >= 1),
    first_failure_at  TIMESTAMPTZ NOT NULL,
    dead_lettered_at  TIMESTAMPTZ NOT NULL,
    last_error        TEXT,
    state             TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'replayed', 'discarded')),
    resolved_by       TEXT,
    resolved_at       TIMESTAMPTZ,
    replay_outbox_id  BIGINT
);
CREATE INDEX dead_letters_open ON dead_letters (dead_lettered_at, id) WHERE state = 'open';
CREATE INDEX dead_letters_by_state ON dead_letters (state, dead_lettered_at, id);
CREATE INDEX dead_letters_by_key ON dead_letters (consumer, idempotency_key, dead_lettered_at);

-- One row per admin action (and login event). Append-only.
CREATE TABLE audit_log (
    id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Generated when a confirmation form is shown: a resubmission is the same action.
    action_id         TEXT UNIQUE,
    at                TIMESTAMPTZ NOT NULL,
    actor             TEXT NOT NULL,
    actor_role        TEXT NOT NULL,
    action            TEXT NOT NULL,
    consumer          TEXT COLLATE "C",
    idempotency_key   TEXT COLLATE "C",
    target            TEXT,
    state_before      TEXT,
    state_after       TEXT,
    reason            TEXT,
    result            TEXT NOT NULL,
    client_addr       TEXT,
    -- Seconds from the item becoming actionable to this action (recovery SLO).
    recovery_seconds  DOUBLE PRECISION
);
CREATE INDEX audit_log_by_time ON audit_log (at, id);
CREATE INDEX audit_log_by_key ON audit_log (consumer, idempotency_key, at);
CREATE INDEX audit_log_by_actor ON audit_log (actor, at);

CREATE FUNCTION audit_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END
$$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_is_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_is_append_only();

-- One row per intent to publish.
CREATE TABLE outbox (
    id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer          TEXT COLLATE "C" NOT NULL,
    topic             TEXT NOT NULL,
    idempotency_key   TEXT COLLATE "C" NOT NULL,
    payload           TEXT NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    published_at      TIMESTAMPTZ,
    attempts          BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error        TEXT,
    origin            TEXT NOT NULL DEFAULT 'application'
                      CHECK (origin IN ('application', 'replay', 'resolution')),
    dead_letter_id    BIGINT REFERENCES dead_letters (id),
    audit_id          BIGINT REFERENCES audit_log (id)
);
CREATE INDEX outbox_unpublished ON outbox (created_at, id) WHERE published_at IS NULL;
CREATE INDEX outbox_by_key ON outbox (consumer, idempotency_key, created_at);

ALTER TABLE dead_letters
    ADD CONSTRAINT dead_letters_replay_outbox_fk FOREIGN KEY (replay_outbox_id) REFERENCES outbox (id);

-- One row per (consumer, metric, minute, histogram bucket); see idem_domain::Metric.
CREATE TABLE consumer_metrics (
    consumer          TEXT COLLATE "C" NOT NULL,
    metric            TEXT NOT NULL,
    minute            TIMESTAMPTZ NOT NULL,
    -- The bucket's upper bound as Prometheus spells it ('300', '+Inf'); '' for counters and gauges.
    bucket            TEXT NOT NULL DEFAULT '',
    value             DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (consumer, metric, minute, bucket)
);
-- Charts across all consumers.
CREATE INDEX consumer_metrics_by_time ON consumer_metrics (metric, minute);

CREATE TABLE users (
    id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username          TEXT NOT NULL UNIQUE,
    role              TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    -- Argon2id PHC string; NULL for users signed in by an identity proxy.
    password_hash     TEXT,
    disabled          BOOLEAN NOT NULL DEFAULT FALSE,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);

-- tower-sessions' table (tower-sessions-sqlx-store's PostgresStore schema).
CREATE TABLE sessions (
    id                TEXT PRIMARY KEY NOT NULL,
    data              BYTEA NOT NULL,
    expiry_date       TIMESTAMPTZ NOT NULL
);
CREATE INDEX sessions_by_expiry ON sessions (expiry_date);

CREATE TABLE idem_meta (
    name              TEXT PRIMARY KEY,
    value             TEXT NOT NULL
);
