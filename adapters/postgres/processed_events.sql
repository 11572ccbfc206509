-- Idem adapter: a processed_events table, read through Idem's data contract.
--
-- For consumers that record each handled event next to the business rows it
-- produced, in one transaction:
--     INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING
--     -- no row inserted: a duplicate, skip the work
-- Source: processed_events(event_id text unique); other columns are ignored.
-- Consumer name: payment-events.
--
-- Install (and install again to upgrade: it replaces its functions and
-- trigger, keeps its counters) in the database that holds processed_events and Idem's tables, after
-- Idem has migrated it, as the role that owns Idem's tables, with a
-- search_path that finds both tables:
--     psql -v ON_ERROR_STOP=1 "$DATABASE_URL" -f adapters/postgres/processed_events.sql
-- It installs, in one transaction:
--   idem_processed_events_as_claim(row)  the mapping, written once: one row as a claim
--   idem_processed_events_claims         a view: every row through the mapping
--   zz_idem_mirror (trigger)    keeps Idem's claims table in step, inside the
--                               writer's own transaction: a new row adds a
--                               claim, a repeat INSERT … ON CONFLICT DO NOTHING
--                               counts a duplicate, an update, delete or
--                               truncate follows
--   idem_processed_events_deliveries, idem_processed_events_duplicates (sequences)
--                               every INSERT proposed and every one whose key
--                               was already there, counted outside the
--                               writer's transaction, so a worker that rolls
--                               back on a duplicate is still counted; Idem
--                               samples them each minute into its
--                               deliveries and duplicate_claims metrics
--   and a backfill of the rows already there (the table is locked against
--   writes until it commits, so nothing slips between backfill and trigger).
--
-- Then name the consumer read-only: IDEM_READ_ONLY_CONSUMERS=payment-events.
-- To use another consumer name, change it in idem_processed_events_consumer() before
-- installing (after, also UPDATE claims SET consumer = … for the old name).
--
-- Why a mirror and not only the view: Idem's pages read claims through its
-- own indexes (the unknown and failed lists, search, newest activity); a view
-- over processed_events has none of them. What it costs the writer: one indexed
-- upsert into claims per row, in the writer's transaction, which also locks
-- that claim until commit — concurrent deliveries of one key now queue on
-- each other, and a retention DELETE racing a redelivery of the same key can
-- deadlock (Postgres aborts one; retry it). The mirror functions run as
-- their owner (SECURITY DEFINER, search_path fixed at install), so the
-- writer's role needs no rights on Idem's tables. If Idem's claims table is
-- gone, writes to processed_events fail: detach before dropping Idem.
--
-- To detach:
--   DROP TRIGGER zz_idem_mirror ON processed_events;
--   DROP TRIGGER zz_idem_mirror_truncate ON processed_events;
--   DROP VIEW idem_processed_events_claims;
--   DROP FUNCTION idem_processed_events_mirror(), idem_processed_events_truncate(),
--       idem_processed_events_as_claim(processed_events), idem_processed_events_consumer();
--   DROP SEQUENCE idem_processed_events_deliveries, idem_processed_events_duplicates;
--   DELETE FROM adapter_counters WHERE consumer = 'payment-events';
--   DELETE FROM claims WHERE consumer = 'payment-events';
--
-- processed_events has no time column, so a mirrored claim carries the time
-- of the transaction that recorded the event (now()), and the backfill the
-- time it ran; if your table has one (processed_at), use it in
-- idem_processed_events_as_claim instead of now(). What processed_events
-- cannot say — failures, provider references, unknown outcomes, dead
-- letters — Idem does not show. Duplicates are counted as for processed_jobs,
-- racing workers included: per minute even if the handler rolls back, and a
-- claim that waited on another worker's is a duplicate only if that one
-- committed.
-- Rows the contract cannot hold are not mirrored: keys over 512 bytes or
-- with control characters. The trigger is named to fire after any other
-- BEFORE trigger of the table, so it sees the row as it will be stored.

BEGIN;

CREATE OR REPLACE FUNCTION idem_processed_events_consumer() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'payment-events'::text $$;

-- The mapping: one processed_events row as a contract claim. Used by the view, the
-- backfill and the trigger.
CREATE OR REPLACE FUNCTION idem_processed_events_as_claim(r processed_events)
RETURNS TABLE (
    consumer text, idempotency_key text, status text, status_at timestamptz,
    first_delivery_at timestamptz, last_delivery_at timestamptz, delivery_count bigint,
    duplicate_count bigint, attempts bigint, outcome_at timestamptz
)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT idem_processed_events_consumer(), r.event_id, 'sent'::text, t, t, t,
           1::bigint, 0::bigint, 1::bigint, t
    FROM (SELECT now() AS t) AS processed
    WHERE octet_length(r.event_id) BETWEEN 1 AND 512 AND r.event_id !~ '[[:cntrl:]]'
$$;

CREATE OR REPLACE VIEW idem_processed_events_claims AS
    SELECT c.* FROM processed_events r CROSS JOIN LATERAL idem_processed_events_as_claim(r) c;

-- Deliveries and duplicates, counted where a rollback cannot take them back
-- (sequences are not transactional), and registered for Idem to sample.
CREATE SEQUENCE IF NOT EXISTS idem_processed_events_deliveries;
CREATE SEQUENCE IF NOT EXISTS idem_processed_events_duplicates;
INSERT INTO adapter_counters (consumer, metric, sequence_name)
VALUES (idem_processed_events_consumer(), 'deliveries',
        format('%I.%I', current_schema(), 'idem_processed_events_deliveries')),
       (idem_processed_events_consumer(), 'duplicate_claims',
        format('%I.%I', current_schema(), 'idem_processed_events_duplicates'))
ON CONFLICT (consumer, metric)
-- Installed again (an upgrade): the same sequences go on where they were.
DO UPDATE SET sequence_name = excluded.sequence_name,
              sampled = CASE WHEN adapter_counters.sequence_name IS DISTINCT FROM excluded.sequence_name
                             THEN 0 ELSE adapter_counters.sampled END;

CREATE OR REPLACE FUNCTION idem_processed_events_mirror() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    -- Whether the upsert below made the key's claim (true), found it there
    -- (false: a duplicate), or had nothing to mirror (NULL).
    claimed boolean;
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- Counted before ON CONFLICT decides, and kept if the writer rolls
        -- back (a sequence is not transactional).
        PERFORM nextval('idem_processed_events_deliveries');
    END IF;
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
        last_delivery_at = greatest(claims.last_delivery_at, excluded.last_delivery_at)
    RETURNING (xmax = 0) INTO claimed;
    -- A duplicate is a proposed row whose key's claim was already there.
    -- Decided after the upsert, which waits for another worker's
    -- uncommitted claim of the same key: if that worker commits, this one
    -- is a duplicate (counted here, even if this worker then rolls back);
    -- if it rolls back, this one made the claim. Checking the table before
    -- the wait saw neither and counted nothing. A key the contract cannot
    -- hold has no claim to wait on: its duplicates are seen in the table.
    IF TG_OP = 'INSERT' AND (
        NOT claimed
        OR (claimed IS NULL AND EXISTS (SELECT 1 FROM processed_events WHERE event_id = NEW.event_id))
    ) THEN
        PERFORM nextval('idem_processed_events_duplicates');
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS zz_idem_mirror ON processed_events;
CREATE TRIGGER zz_idem_mirror BEFORE INSERT OR UPDATE OR DELETE ON processed_events
    FOR EACH ROW EXECUTE FUNCTION idem_processed_events_mirror();

CREATE OR REPLACE FUNCTION idem_processed_events_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM claims WHERE consumer = idem_processed_events_consumer();
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS zz_idem_mirror_truncate ON processed_events;
CREATE TRIGGER zz_idem_mirror_truncate AFTER TRUNCATE ON processed_events
    FOR EACH STATEMENT EXECUTE FUNCTION idem_processed_events_truncate();

LOCK TABLE processed_events IN SHARE MODE;
INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at,
                    last_delivery_at, delivery_count, duplicate_count, attempts, outcome_at)
SELECT * FROM idem_processed_events_claims
ON CONFLICT (consumer, idempotency_key) DO NOTHING;

COMMIT;
