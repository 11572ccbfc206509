-- Idem adapter: a reminder store that records its own outcomes, read
-- through Idem's data contract.
--
-- For consumers that keep one row per reminder with its own status:
--     reminder_sends(reminder_id text primary key,
--                    status text,          -- pending | sent | failed | unknown
--                    provider_message_id text, last_error text,
--                    attempts integer, created_at timestamptz, updated_at timestamptz)
-- claimed with INSERT … ON CONFLICT (reminder_id) DO NOTHING and updated as
-- the provider answers. Consumer name: reminders-legacy.
--
-- Install like processed_jobs.sql (whose header explains the mirror, its
-- cost, its privileges, renaming and what is counted under which races);
-- installing again upgrades in place:
--     psql -v ON_ERROR_STOP=1 "$DATABASE_URL" -f adapters/postgres/reminder_store.sql
-- To detach:
--   DROP TRIGGER zz_idem_mirror ON reminder_sends;
--   DROP TRIGGER zz_idem_mirror_truncate ON reminder_sends;
--   DROP VIEW idem_reminder_sends_claims;
--   DROP FUNCTION idem_reminder_sends_mirror(), idem_reminder_sends_truncate(),
--       idem_reminder_sends_as_claim(reminder_sends), idem_reminder_sends_consumer(),
--       idem_reminder_sends_resolve(text, text, text, text);
--   DROP SEQUENCE idem_reminder_sends_deliveries, idem_reminder_sends_duplicates;
--   DELETE FROM adapter_counters WHERE consumer = 'reminders-legacy';
--   DELETE FROM adapter_write_backs WHERE consumer = 'reminders-legacy';
--   DELETE FROM claims WHERE consumer = 'reminders-legacy';
--
-- This shape has outcomes, so Idem's unknown and failed lists, provider
-- reference search and "unknown since" work for it. A status change is
-- dated by the transaction that made it (now()), whether or not the store
-- moves updated_at. Set IDEM_READ_ONLY_CONSUMERS=reminders-legacy: Idem
-- then refuses what reminder_sends cannot hold (a replay, a retry through
-- Idem's outbox) with the reason, but resolves an unknown reminder by
-- writing the outcome into reminder_sends itself through
-- idem_reminder_sends_resolve (registered in adapter_write_backs), in the
-- same transaction as its audit row; the mirror then follows as for any
-- update. It changes only a row still unknown (or in a status outside the
-- four); one the store's own worker resolved first is left alone, and Idem
-- says so. A status outside the four is mirrored as
-- 'unknown', so it is looked at rather than hidden; keys over 512 bytes or
-- with control characters are not mirrored. Deliveries and duplicates are
-- also counted per minute in two sequences (idem_reminder_sends_deliveries,
-- idem_reminder_sends_duplicates), which a rollback does not undo, as
-- processed_jobs.sql explains.

BEGIN;

CREATE OR REPLACE FUNCTION idem_reminder_sends_consumer() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'reminders-legacy'::text $$;

CREATE OR REPLACE FUNCTION idem_reminder_sends_as_claim(r reminder_sends)
RETURNS TABLE (
    consumer text, idempotency_key text, status text, status_at timestamptz,
    first_delivery_at timestamptz, last_delivery_at timestamptz, attempts bigint,
    provider_ref text, last_error text, outcome_at timestamptz
)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT idem_reminder_sends_consumer(), r.reminder_id, s.status,
           coalesce(r.updated_at, r.created_at, now()),
           coalesce(r.created_at, now()), coalesce(r.updated_at, r.created_at, now()),
           greatest(coalesce(r.attempts, 0), 0)::bigint, r.provider_message_id, r.last_error,
           CASE WHEN s.status <> 'pending' THEN coalesce(r.updated_at, now()) END
    FROM (SELECT CASE WHEN r.status IN ('pending', 'sent', 'failed', 'unknown')
                      THEN r.status ELSE 'unknown' END AS status) AS s
    WHERE octet_length(r.reminder_id) BETWEEN 1 AND 512 AND r.reminder_id !~ '[[:cntrl:]]'
$$;

CREATE OR REPLACE VIEW idem_reminder_sends_claims AS
    SELECT c.* FROM reminder_sends r CROSS JOIN LATERAL idem_reminder_sends_as_claim(r) c;

-- Deliveries and duplicates, counted where a rollback cannot take them back
-- (sequences are not transactional), and registered for Idem to sample.
CREATE SEQUENCE IF NOT EXISTS idem_reminder_sends_deliveries;
CREATE SEQUENCE IF NOT EXISTS idem_reminder_sends_duplicates;
INSERT INTO adapter_counters (consumer, metric, sequence_name)
VALUES (idem_reminder_sends_consumer(), 'deliveries',
        format('%I.%I', current_schema(), 'idem_reminder_sends_deliveries')),
       (idem_reminder_sends_consumer(), 'duplicate_claims',
        format('%I.%I', current_schema(), 'idem_reminder_sends_duplicates'))
ON CONFLICT (consumer, metric)
-- Installed again (an upgrade): the same sequences go on where they were.
DO UPDATE SET sequence_name = excluded.sequence_name,
              sampled = CASE WHEN adapter_counters.sequence_name IS DISTINCT FROM excluded.sequence_name
                             THEN 0 ELSE adapter_counters.sampled END;

CREATE OR REPLACE FUNCTION idem_reminder_sends_mirror() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    -- Whether the upsert below made the key's claim (true), found it there
    -- (false: a duplicate), or had nothing to mirror (NULL).
    claimed boolean;
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- Counted before ON CONFLICT decides, and kept if the writer rolls
        -- back (a sequence is not transactional).
        PERFORM nextval('idem_reminder_sends_deliveries');
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM claims
        WHERE consumer = idem_reminder_sends_consumer() AND idempotency_key = OLD.reminder_id;
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.reminder_id IS DISTINCT FROM NEW.reminder_id THEN
            DELETE FROM claims
            WHERE consumer = idem_reminder_sends_consumer() AND idempotency_key = OLD.reminder_id;
        END IF;
    END IF;
    -- An INSERT that ON CONFLICT DO NOTHING skips is a repeat delivery:
    -- counted, nothing else changes. An UPDATE carries the store's new state.
    INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at,
                        last_delivery_at, attempts, provider_ref, last_error, outcome_at)
    SELECT * FROM idem_reminder_sends_as_claim(NEW)
    ON CONFLICT (consumer, idempotency_key) DO UPDATE SET
        delivery_count = claims.delivery_count + CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE 0 END,
        duplicate_count = claims.duplicate_count + CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE 0 END,
        last_delivery_at = CASE WHEN TG_OP = 'INSERT'
                                THEN greatest(claims.last_delivery_at, now())
                                ELSE claims.last_delivery_at END,
        status = CASE WHEN TG_OP = 'INSERT' THEN claims.status ELSE excluded.status END,
        status_at = CASE WHEN TG_OP = 'INSERT' OR claims.status = excluded.status
                         THEN claims.status_at ELSE now() END,
        attempts = CASE WHEN TG_OP = 'INSERT' THEN claims.attempts ELSE excluded.attempts END,
        provider_ref = CASE WHEN TG_OP = 'INSERT' THEN claims.provider_ref ELSE excluded.provider_ref END,
        last_error = CASE WHEN TG_OP = 'INSERT' THEN claims.last_error ELSE excluded.last_error END,
        outcome_at = CASE WHEN TG_OP = 'INSERT' OR claims.status = excluded.status
                          THEN claims.outcome_at
                          WHEN excluded.status = 'pending' THEN NULL ELSE now() END,
        version = claims.version + CASE WHEN TG_OP = 'INSERT' THEN 0 ELSE 1 END
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
        OR (claimed IS NULL AND EXISTS (SELECT 1 FROM reminder_sends WHERE reminder_id = NEW.reminder_id))
    ) THEN
        PERFORM nextval('idem_reminder_sends_duplicates');
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS zz_idem_mirror ON reminder_sends;
CREATE TRIGGER zz_idem_mirror BEFORE INSERT OR UPDATE OR DELETE ON reminder_sends
    FOR EACH ROW EXECUTE FUNCTION idem_reminder_sends_mirror();

CREATE OR REPLACE FUNCTION idem_reminder_sends_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM claims WHERE consumer = idem_reminder_sends_consumer();
    RETURN NULL;
END
$$;

-- A resolution from Idem, written where the store's workers look: sent with
-- the provider's reference, or failed with the operator's reason. True when
-- the row was still unresolved and now holds the outcome.
CREATE OR REPLACE FUNCTION idem_reminder_sends_resolve(
    p_key text, p_status text, p_provider_ref text, p_last_error text
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF p_status NOT IN ('sent', 'failed') THEN
        RAISE EXCEPTION 'a resolution is sent or failed, not %', p_status;
    END IF;
    UPDATE reminder_sends
    SET status = p_status,
        provider_message_id = coalesce(p_provider_ref, provider_message_id),
        last_error = p_last_error,
        updated_at = now()
    WHERE reminder_id = p_key
      AND (status IS NULL OR status NOT IN ('pending', 'sent', 'failed'));
    RETURN FOUND;
END
$$;

INSERT INTO adapter_write_backs (consumer, resolve_function)
VALUES (idem_reminder_sends_consumer(),
        format('%I.%I', current_schema(), 'idem_reminder_sends_resolve'))
ON CONFLICT (consumer) DO UPDATE SET resolve_function = excluded.resolve_function;

DROP TRIGGER IF EXISTS zz_idem_mirror_truncate ON reminder_sends;
CREATE TRIGGER zz_idem_mirror_truncate AFTER TRUNCATE ON reminder_sends
    FOR EACH STATEMENT EXECUTE FUNCTION idem_reminder_sends_truncate();

LOCK TABLE reminder_sends IN SHARE MODE;
INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at,
                    last_delivery_at, attempts, provider_ref, last_error, outcome_at)
SELECT * FROM idem_reminder_sends_claims
ON CONFLICT (consumer, idempotency_key) DO NOTHING;

COMMIT;
