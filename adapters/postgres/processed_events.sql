-- Idem adapter: a processed_events table, read through Idem's data contract.
--
-- For consumers that record each handled event next to the business rows
-- it produced, in one transaction:
--     INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING
--     -- no row inserted: a duplicate, skip the work
-- The table needs only event_id (text, unique); other columns are ignored.
-- Run this file once (psql -f) in the database that holds processed_events
-- and Idem's tables, after Idem has migrated it. It installs a view
-- (idem_processed_events_claims: each event as a 'sent' claim), a trigger
-- that mirrors events into Idem's claims table in the event's own
-- transaction, and a backfill of the events already there. See
-- processed_jobs.sql for why a mirror, how duplicates are counted and how
-- to detach; then set IDEM_READ_ONLY_CONSUMERS=payment-events.
--
-- processed_events has no time column, so a mirrored claim carries the
-- time of the transaction that recorded the event (now()), and the backfill
-- carries the time it ran. If your table has one (processed_at), use it in
-- idem_processed_events_as_claim instead of now(). What processed_events
-- cannot say — failures, provider references, unknown outcomes, dead
-- letters — Idem does not show. Event ids longer than 512 bytes are skipped.

BEGIN;

CREATE FUNCTION idem_processed_events_consumer() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'payment-events'::text $$;

-- The mapping, written once: one processed job as a contract claim. Used by
-- the view, the backfill and the trigger.
CREATE FUNCTION idem_processed_events_as_claim(e processed_events)
RETURNS TABLE (
    consumer text, idempotency_key text, status text, status_at timestamptz,
    first_delivery_at timestamptz, last_delivery_at timestamptz, delivery_count bigint,
    duplicate_count bigint, attempts bigint, outcome_at timestamptz
)
LANGUAGE sql STABLE AS $$
    SELECT idem_processed_events_consumer(), e.event_id, 'sent'::text, t, t, t,
           1::bigint, 0::bigint, 1::bigint, t
    FROM (SELECT now() AS t) AS processed
    WHERE octet_length(e.event_id) BETWEEN 1 AND 512
$$;

CREATE VIEW idem_processed_events_claims AS
    SELECT c.* FROM processed_events e CROSS JOIN LATERAL idem_processed_events_as_claim(e) c;

CREATE FUNCTION idem_processed_events_mirror() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM claims
        WHERE consumer = idem_processed_events_consumer() AND idempotency_key = OLD.event_id;
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.event_id IS DISTINCT FROM NEW.event_id THEN
            DELETE FROM claims
            WHERE consumer = idem_processed_events_consumer() AND idempotency_key = OLD.event_id;
        END IF;
    END IF;
    -- BEFORE INSERT runs for every row an INSERT proposes, including one ON
    -- CONFLICT DO NOTHING then skips: that is how a duplicate is counted.
    INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at,
                        last_delivery_at, delivery_count, duplicate_count, attempts, outcome_at)
    SELECT * FROM idem_processed_events_as_claim(NEW)
    ON CONFLICT (consumer, idempotency_key) DO UPDATE SET
        delivery_count = claims.delivery_count + CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE 0 END,
        duplicate_count = claims.duplicate_count + CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE 0 END,
        last_delivery_at = greatest(claims.last_delivery_at, excluded.last_delivery_at);
    RETURN NEW;
END
$$;

CREATE TRIGGER idem_mirror BEFORE INSERT OR UPDATE OR DELETE ON processed_events
    FOR EACH ROW EXECUTE FUNCTION idem_processed_events_mirror();

CREATE FUNCTION idem_processed_events_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM claims WHERE consumer = idem_processed_events_consumer();
    RETURN NULL;
END
$$;

CREATE TRIGGER idem_mirror_truncate AFTER TRUNCATE ON processed_events
    FOR EACH STATEMENT EXECUTE FUNCTION idem_processed_events_truncate();

-- The jobs already processed. Installing locks processed_events against
-- writes until this commits, so no job slips between backfill and trigger.
LOCK TABLE processed_events IN SHARE MODE;
INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at,
                    last_delivery_at, delivery_count, duplicate_count, attempts, outcome_at)
SELECT * FROM idem_processed_events_claims
ON CONFLICT (consumer, idempotency_key) DO NOTHING;

COMMIT;
