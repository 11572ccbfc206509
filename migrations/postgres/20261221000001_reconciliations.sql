-- A reconciliation: a provider's export held against one consumer's claims.
-- Kept as run (who, when, which file, what it found); nothing in it changes
-- a claim until a person applies a class, as a bulk resolve.
CREATE TABLE reconciliations (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The form's action id (or the API's Idempotency-Key): sent again, the
    -- first reconciliation answers.
    action_id       TEXT NOT NULL UNIQUE,
    consumer        TEXT COLLATE "C" NOT NULL,
    actor           TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    file_name       TEXT NOT NULL,
    file_sha256     TEXT NOT NULL,
    file_bytes      BIGINT NOT NULL,
    records         BIGINT NOT NULL,
    bad_lines       BIGINT NOT NULL,
    -- The first bad lines, one `line N: why` a line.
    bad_sample      TEXT NOT NULL,
    -- The records' times; NULL when no record was read.
    span_from       TIMESTAMPTZ,
    span_to         TIMESTAMPTZ,
    latency_seconds BIGINT NOT NULL,
    status_words    TEXT NOT NULL,
    audit_id        BIGINT NOT NULL
);
CREATE INDEX reconciliations_by_consumer ON reconciliations (consumer, id);

-- What each class holds: a claim, a provider's record, or both.
CREATE TABLE reconciliation_rows (
    reconciliation_id BIGINT NOT NULL REFERENCES reconciliations (id),
    class             TEXT NOT NULL CHECK (class IN ('unknown-accepted', 'unknown-absent',
                          'sent-absent', 'accepted-unclaimed', 'shared-reference', 'failed-accepted')),
    seq               BIGINT NOT NULL,
    -- The export's line (NULL for a claim the export has no record of).
    line              BIGINT,
    -- The claim's key, else the record's; NULL for a record with neither.
    idempotency_key   TEXT COLLATE "C",
    -- The claim as the reconciliation read it (NULL for no claim).
    claim_status      TEXT,
    version           BIGINT,
    -- The record's (else the claim's) provider reference.
    provider_ref      TEXT,
    provider_status   TEXT,
    provider_at       TIMESTAMPTZ,
    note              TEXT,
    -- Shown, but never taken by an apply: the export cannot prove it.
    held              BOOLEAN NOT NULL DEFAULT FALSE,
    -- The bulk resolve that applied this row, once applied.
    applied_run       BIGINT,
    PRIMARY KEY (reconciliation_id, class, seq)
);
-- "Reconciled in #N" on a key's page.
CREATE INDEX reconciliation_rows_by_key ON reconciliation_rows (idempotency_key, reconciliation_id)
    WHERE idempotency_key IS NOT NULL;
