-- Counters an adapter keeps outside the consumer's transaction, which Idem
-- samples once a minute into consumer_metrics. A worker that claims with
-- INSERT … ON CONFLICT DO NOTHING and rolls back when no row comes back
-- takes its duplicate with it; a sequence bumped by the adapter's trigger
-- is not transactional, so the count survives the rollback.
--   sequence_name  the sequence holding the running count (Postgres only);
--                  NULL says the adapter cannot observe this metric, and
--                  Idem shows "not observable" instead of a rate
--   sampled        the sequence's value at the last sample
CREATE TABLE adapter_counters (
    consumer      TEXT NOT NULL,
    metric        TEXT NOT NULL,
    sequence_name TEXT,
    sampled       BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, metric)
);
