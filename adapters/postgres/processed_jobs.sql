-- Idem adapter: a processed_jobs table, read through Idem's data contract.
--
-- For consumers that claim a job with
--     INSERT INTO processed_jobs (idempotency_key, message_id, processed_at)
--     VALUES ($1, $2, now()) ON CONFLICT DO NOTHING
-- in the same transaction as the job's work (no row inserted: a duplicate).
-- Source: processed_jobs(idempotency_key text primary key, message_id text,
-- processed_at timestamptz). Consumer name: billing-jobs.
--
-- Install (and install again to upgrade: it replaces its functions and
-- trigger, keeps its counters) in the database that holds processed_jobs and Idem's tables, after
-- Idem has migrated it, as the role that owns Idem's tables, with a
-- search_path that finds both tables:
--     psql -v ON_ERROR_STOP=1 "$DATABASE_URL" -f adapters/postgres/processed_jobs.sql
-- It installs, in one transaction:
--   idem_processed_jobs_as_claim(row)  the mapping, written once: one row as a claim
--   idem_processed_jobs_claims         a view: every row through the mapping
--   zz_idem_mirror (trigger)    keeps Idem's claims table in step, inside the
--                               writer's own transaction: a new row adds a
--                               claim, a repeat INSERT … ON CONFLICT DO NOTHING
--                               counts a duplicate, an update, delete or
--                               truncate follows
--   idem_processed_jobs_deliveries, idem_processed_jobs_duplicates (sequences)
--                               every INSERT proposed and every one whose key
--                               was already there, counted outside the
--                               writer's transaction, so a worker that rolls
--                               back on a duplicate is still counted; Idem
--                               samples them each minute into its
--                               deliveries and duplicate_claims metrics
--   and a backfill of the rows already there (the table is locked against
--   writes until it commits, so nothing slips between backfill and trigger).
--
-- Then name the consumer read-only: IDEM_READ_ONLY_CONSUMERS=billing-jobs.
-- To use another consumer name, change it in idem_processed_jobs_consumer() before
-- installing (after, also UPDATE claims SET consumer = … for the old name).
--
-- Why a mirror and not only the view: Idem's pages read claims through its
-- own indexes (the unknown and failed lists, search, newest activity); a view
-- over processed_jobs has none of them. What it costs the writer: one indexed
-- upsert into claims per row, in the writer's transaction, which also locks
-- that claim until commit — concurrent deliveries of one key now queue on
-- each other, and a retention DELETE racing a redelivery of the same key can
-- deadlock (Postgres aborts one; retry it). The mirror functions run as
-- their owner (SECURITY DEFINER, search_path fixed at install), so the
-- writer's role needs no rights on Idem's tables. If Idem's claims table is
-- gone, writes to processed_jobs fail: detach before dropping Idem.
--
-- To detach:
--   DROP TRIGGER zz_idem_mirror ON processed_jobs;
--   DROP TRIGGER zz_idem_mirror_truncate ON processed_jobs;
--   DROP VIEW idem_processed_jobs_claims;
--   DROP FUNCTION idem_processed_jobs_mirror(), idem_processed_jobs_truncate(),
--       idem_processed_jobs_as_claim(processed_jobs), idem_processed_jobs_consumer();
--   DROP SEQUENCE idem_processed_jobs_deliveries, idem_processed_jobs_duplicates;
--   DELETE FROM adapter_counters WHERE consumer = 'billing-jobs';
--   DELETE FROM claims WHERE consumer = 'billing-jobs';
--
-- What processed_jobs cannot say, Idem does not show: it records only
-- success, so a failing job (its transaction rolls back) has no claim, and
-- there are no provider references, unknown outcomes or dead letters;
-- message_id has no place in a claim. A duplicate is a proposed row whose
-- key was already claimed when its INSERT got to decide: counted per minute
-- (the duplicate-claim rate) whether its worker then commits or rolls back,
-- as a worker that ROLLBACKs when no row comes back does, or one whose plain
-- INSERT fails on the primary key; per key (Deliveries on the key's page)
-- only when its worker commits. Workers racing on one key: the second
-- INSERT waits for the first worker's transaction. If that commits, the
-- second is a duplicate; if it rolls back (or its worker is killed), the
-- second makes the claim and is none — what the workers themselves see. A worker that looks
-- the key up first and skips never reaches the INSERT: its duplicates are
-- invisible here. Say so, and Idem shows its duplicate-claim rate as "not
-- observable" instead of a rate that only looks perfect:
--   UPDATE adapter_counters SET sequence_name = NULL
--   WHERE consumer = 'billing-jobs' AND metric = 'duplicate_claims';
-- Rows the contract cannot hold are not mirrored: keys over 512 bytes or
-- with control characters. The trigger is named to fire after any other
-- BEFORE trigger of the table, so it sees the row as it will be stored.

BEGIN;

CREATE OR REPLACE FUNCTION idem_processed_jobs_consumer() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'billing-jobs'::text $$;

-- The mapping: one processed_jobs row as a contract claim. Used by the view, the
-- backfill and the trigger.
CREATE OR REPLACE FUNCTION idem_processed_jobs_as_claim(r processed_jobs)
RETURNS TABLE (
    consumer text, idempotency_key text, status text, status_at timestamptz,
    first_delivery_at timestamptz, last_delivery_at timestamptz, delivery_count bigint,
    duplicate_count bigint, attempts bigint, outcome_at timestamptz
)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT idem_processed_jobs_consumer(), r.idempotency_key, 'sent'::text, t, t, t,
           1::bigint, 0::bigint, 1::bigint, t
    FROM (SELECT coalesce(r.processed_at, now()) AS t) AS processed
    WHERE octet_length(r.idempotency_key) BETWEEN 1 AND 512 AND r.idempotency_key !~ '[[:cntrl:]]'
$$;

CREATE OR REPLACE VIEW idem_processed_jobs_claims AS
    SELECT c.* FROM processed_jobs r CROSS JOIN LATERAL idem_processed_jobs_as_claim(r) c;

-- Deliveries and duplicates, counted where a rollback cannot take them back
-- (sequences are not transactional), and registered for Idem to sample.
CREATE SEQUENCE IF NOT EXISTS idem_processed_jobs_deliveries;
CREATE SEQUENCE IF NOT EXISTS idem_processed_jobs_duplicates;
INSERT INTO adapter_counters (consumer, metric, sequence_name)
VALUES (idem_processed_jobs_consumer(), 'deliveries',
        format('%I.%I', current_schema(), 'idem_processed_jobs_deliveries')),
       (idem_processed_jobs_consumer(), 'duplicate_claims',
        format('%I.%I', current_schema(), 'idem_processed_jobs_duplicates'))
ON CONFLICT (consumer, metric)
-- Installed again (an upgrade): the same sequences go on where they were.
DO UPDATE SET sequence_name = excluded.sequence_name,
              sampled = CASE WHEN adapter_counters.sequence_name IS DISTINCT FROM excluded.sequence_name
                             THEN 0 ELSE adapter_counters.sampled END;

CREATE OR REPLACE FUNCTION idem_processed_jobs_mirror() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    -- Whether the upsert below made the key's claim (true), found it there
    -- (false: a duplicate), or had nothing to mirror (NULL).
    claimed boolean;
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- Counted before ON CONFLICT decides, and kept if the writer rolls
        -- back (a sequence is not transactional).
        PERFORM nextval('idem_processed_jobs_deliveries');
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM claims
        WHERE consumer = idem_processed_jobs_consumer() AND idempotency_key = OLD.idempotency_key;
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.idempotency_key IS DISTINCT FROM NEW.idempotency_key THEN
            DELETE FROM claims
            WHERE consumer = idem_processed_jobs_consumer() AND idempotency_key = OLD.idempotency_key;
        END IF;
    END IF;
    -- BEFORE INSERT runs for every row an INSERT proposes, including one ON
    -- CONFLICT DO NOTHING then skips: that is how a duplicate is counted.
    INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at,
                        last_delivery_at, delivery_count, duplicate_count, attempts, outcome_at)
    SELECT * FROM idem_processed_jobs_as_claim(NEW)
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
        OR (claimed IS NULL AND EXISTS (SELECT 1 FROM processed_jobs WHERE idempotency_key = NEW.idempotency_key))
    ) THEN
        PERFORM nextval('idem_processed_jobs_duplicates');
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS zz_idem_mirror ON processed_jobs;
CREATE TRIGGER zz_idem_mirror BEFORE INSERT OR UPDATE OR DELETE ON processed_jobs
    FOR EACH ROW EXECUTE FUNCTION idem_processed_jobs_mirror();

CREATE OR REPLACE FUNCTION idem_processed_jobs_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM claims WHERE consumer = idem_processed_jobs_consumer();
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS zz_idem_mirror_truncate ON processed_jobs;
CREATE TRIGGER zz_idem_mirror_truncate AFTER TRUNCATE ON processed_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION idem_processed_jobs_truncate();

LOCK TABLE processed_jobs IN SHARE MODE;
INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at,
                    last_delivery_at, delivery_count, duplicate_count, attempts, outcome_at)
SELECT * FROM idem_processed_jobs_claims
ON CONFLICT (consumer, idempotency_key) DO NOTHING;

COMMIT;
