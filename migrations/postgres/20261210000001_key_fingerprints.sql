-- Keys stay out of Idem's ordinary logs: a request about a key logs a keyed
-- fingerprint of its consumer and key instead (app/src/fingerprint.rs). The
-- first time a replica logs one, it is kept here, so searching a fingerprint
-- found in a log finds its key. The secret it is keyed with is in idem_meta
-- (`log_fingerprint_secret`) unless IDEM_LOG_KEY_SECRET sets one.
CREATE TABLE key_fingerprints (
    fingerprint       TEXT PRIMARY KEY,
    consumer          TEXT COLLATE "C" NOT NULL,
    idempotency_key   TEXT COLLATE "C" NOT NULL,
    first_logged_at   TIMESTAMPTZ NOT NULL
);
