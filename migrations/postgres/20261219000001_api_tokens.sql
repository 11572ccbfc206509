-- Tokens for machines and people's scripts (`/api/v1`). The secret is shown
-- once and kept only as its SHA-256 (hex): it is 32 random bytes, so a fast
-- hash is enough. `owner` names the account answerable for the token; a
-- token of a disabled or deleted account is refused. `rights` as in
-- `users` (NULL: `role` on every consumer).
CREATE TABLE api_tokens (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    owner          TEXT NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    rights         TEXT,
    secret_sha256  TEXT NOT NULL UNIQUE,
    created_by     TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    expires_at     TIMESTAMPTZ,
    last_used_at   TIMESTAMPTZ,
    revoked_at     TIMESTAMPTZ
);

-- One row per Idempotency-Key a token sent with a write: the request's
-- fingerprint, and once answered, the answer (NULL while the first request
-- runs). Kept at least 24 hours (the sweeper deletes rows older than 48).
CREATE TABLE api_idempotency (
    token_id         BIGINT NOT NULL REFERENCES api_tokens (id),
    idempotency_key  TEXT COLLATE "C" NOT NULL,
    fingerprint      TEXT NOT NULL,
    started_at       TIMESTAMPTZ NOT NULL,
    status           INTEGER,
    body             TEXT,
    PRIMARY KEY (token_id, idempotency_key)
);
CREATE INDEX api_idempotency_by_age ON api_idempotency (started_at);
