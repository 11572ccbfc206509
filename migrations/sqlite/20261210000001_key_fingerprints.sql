-- Keys stay out of Idem's ordinary logs (see the Postgres migration of the
-- same version).
CREATE TABLE key_fingerprints (
    fingerprint       TEXT PRIMARY KEY,
    consumer          TEXT NOT NULL,
    idempotency_key   TEXT NOT NULL,
    first_logged_at   INTEGER NOT NULL
) WITHOUT ROWID;
