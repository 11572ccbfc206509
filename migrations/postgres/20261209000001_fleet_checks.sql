-- Fleet-wide consistency checks (/checks): each check reads a range of an
-- index that stays small in a healthy fleet, never the whole of `claims`.

-- "Sent without a provider reference", newest last (status_at = sent at).
CREATE INDEX claims_sent_without_ref ON claims (status_at, consumer, idempotency_key)
    WHERE status = 'sent' AND provider_ref IS NULL;
-- "Abandoned leases": pending claims whose lease ran out, by when it did
-- (most pending claims hold no lease; the check reads only those that do).
CREATE INDEX claims_pending_leases ON claims (lease_until, consumer, idempotency_key)
    WHERE status = 'pending' AND lease_until IS NOT NULL;
-- "Payload drift": a later delivery's hash differed from the first.
CREATE INDEX claims_payload_drift ON claims (last_delivery_at, consumer, idempotency_key)
    WHERE last_payload_hash IS NOT NULL;
-- Outcomes with a provider reference, in the order they were recorded: the
-- shared-reference sweep walks it forward from its watermark, so finding
-- references on two keys costs the new outcomes, not the table.
CREATE INDEX claims_by_outcome ON claims (outcome_at) WHERE provider_ref IS NOT NULL;

-- Keys whose provider reference another key also records, as the sweep
-- found them (store/src/checks/shared_refs.rs). Pruned when a claim no
-- longer records the reference or is the last one left holding it.
CREATE TABLE shared_provider_refs (
    provider_ref      TEXT NOT NULL,
    consumer          TEXT COLLATE "C" NOT NULL,
    idempotency_key   TEXT COLLATE "C" NOT NULL,
    found_at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (provider_ref, consumer, idempotency_key)
);
CREATE INDEX shared_provider_refs_by_time ON shared_provider_refs (found_at, consumer, idempotency_key);
