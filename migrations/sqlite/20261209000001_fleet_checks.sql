-- Fleet-wide consistency checks (see the Postgres migration of the same
-- version for the reasons).

CREATE INDEX claims_sent_without_ref ON claims (status_at, consumer, idempotency_key)
    WHERE status = 'sent' AND provider_ref IS NULL;
CREATE INDEX claims_pending_leases ON claims (lease_until, consumer, idempotency_key)
    WHERE status = 'pending' AND lease_until IS NOT NULL;
CREATE INDEX claims_payload_drift ON claims (last_delivery_at, consumer, idempotency_key)
    WHERE last_payload_hash IS NOT NULL;
CREATE INDEX claims_by_outcome ON claims (outcome_at) WHERE provider_ref IS NOT NULL;

CREATE TABLE shared_provider_refs (
    provider_ref      TEXT NOT NULL,
    consumer          TEXT NOT NULL,
    idempotency_key   TEXT NOT NULL,
    found_at          INTEGER NOT NULL,
    PRIMARY KEY (provider_ref, consumer, idempotency_key)
) WITHOUT ROWID;
CREATE INDEX shared_provider_refs_by_time ON shared_provider_refs (found_at, consumer, idempotency_key);
