-- Idem adapter: a processed_jobs table, read through Idem's data contract.
--
-- For consumers that claim a job with
--     INSERT INTO processed_jobs (idempotency_key, message_id, processed_at)
--     VALUES ($1, $2, now()) ON CONFLICT DO NOTHING
-- in the same transaction as the job's work. Run this file once (psql -f)
-- in the database that holds processed_jobs and Idem's tables, after Idem
-- has migrated it. It installs:
--
--   idem_processed_jobs_claims  a view: each processed job as a contract
--                               claim (status 'sent': the job's work committed)
--   a trigger on processed_jobs that keeps Idem's claims table in step in
--                               the job's own transaction: a new job adds a
--                               claim, a repeat delivery counts a duplicate,
--                               a deleted or truncated job takes its claim along
--   a backfill of the jobs already there.
--
-- Why a mirror and not only the view: Idem's pages read claims through its
-- own indexes (the unknown and failed lists, search, newest activity), and a
-- view over processed_jobs has none of them. The mirror costs one indexed
-- upsert per job, in the job's transaction.
--
-- Then tell Idem the consumer is read-only (IDEM_READ_ONLY_CONSUMERS=billing-jobs):
-- its pages work, and actions that would need writes processed_jobs cannot
-- take are shown as unavailable with the reason.
--
-- To rename the consumer, change 'billing-jobs' in idem_processed_jobs_consumer().
-- To detach: DROP TRIGGER idem_mirror ON processed_jobs; DROP TRIGGER
-- idem_mirror_truncate ON processed_jobs; DROP VIEW idem_processed_jobs_claims;
-- DROP FUNCTION idem_processed_jobs_mirror(), idem_processed_jobs_truncate(),
-- idem_processed_jobs_as_claim(processed_jobs), idem_processed_jobs_consumer();
-- then DELETE FROM claims WHERE consumer = 'billing-jobs'.
--
-- What the source cannot say, Idem does not show: processed_jobs records
-- only success, so a failing job (its transaction rolls back) leaves no
-- claim, and there are no provider references, unknown outcomes or dead
-- letters. A duplicate is counted only when it reaches the INSERT (ON
-- CONFLICT DO NOTHING): a worker that checks for the key first and skips,
-- or whose duplicate INSERT fails with a unique violation and rolls back,
-- is invisible. Keys longer than the contract's 512 bytes are skipped.

BEGIN;

CREATE FUNCTION idem_processed_jobs_consumer() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'billing-jobs'::text $$;

-- The mapping, written once: one processed job as a contract claim. Used by
-- the view, the backfill and the trigger.
CREATE FUNCTION idem_processed_jobs_as_claim(j processed_jobs)
RETURNS TABLE (
    consumer text, idempotency_key text, status text, status_at timestamptz,
    first_delivery_at timestamptz, last_delivery_at timestamptz, delivery_count bigint,
    duplicate_count bigint, attempts bigint, outcome_at timestamptz
)
LANGUAGE sql STABLE AS $$
    SELECT idem_processed_jobs_consumer(), j.idempotency_key, 'sent'::text, t, t, t,
           1::bigint, 0::bigint, 1::bigint, t
    FROM (SELECT coalesce(j.processed_at, now()) AS t) AS processed
    WHERE octet_length(j.idempotency_key) BETWEEN 1 AND 512
$$;

CREATE VIEW idem_processed_jobs_claims AS
    SELECT c.* FROM processed_jobs j CROSS JOIN LATERAL idem_processed_jobs_as_claim(j) c;

CREATE FUNCTION idem_processed_jobs_mirror() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
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
        last_delivery_at = greatest(claims.last_delivery_at, excluded.last_delivery_at);
    RETURN NEW;
END
$$;

CREATE TRIGGER idem_mirror BEFORE INSERT OR UPDATE OR DELETE ON processed_jobs
    FOR EACH ROW EXECUTE FUNCTION idem_processed_jobs_mirror();

CREATE FUNCTION idem_processed_jobs_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM claims WHERE consumer = idem_processed_jobs_consumer();
    RETURN NULL;
END
$$;

CREATE TRIGGER idem_mirror_truncate AFTER TRUNCATE ON processed_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION idem_processed_jobs_truncate();

-- The jobs already processed. Installing locks processed_jobs against
-- writes until this commits, so no job slips between backfill and trigger.
LOCK TABLE processed_jobs IN SHARE MODE;
INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at,
                    last_delivery_at, delivery_count, duplicate_count, attempts, outcome_at)
SELECT * FROM idem_processed_jobs_claims
ON CONFLICT (consumer, idempotency_key) DO NOTHING;

COMMIT;
