-- SLOs and charts: hourly rollups of consumer_metrics, maintained by Idem
-- (idem_store::rollup) so long windows read O(hours), not O(minutes).
--
-- Counters and histogram buckets hold the hour's sum. Gauges hold, per
-- bucket of idem_domain::GAUGE_SLICE_BOUNDS, how many consumer-minutes had a
-- reading in that bucket, so "minutes at or under a threshold" is a sum.
-- Idem rolls up an hour once it has settled, then moves the watermark in
-- idem_meta ('rollup_hourly_through'); readers use minutes past it.
CREATE TABLE consumer_metrics_hourly (
    consumer          TEXT COLLATE "C" NOT NULL,
    metric            TEXT NOT NULL,
    hour              TIMESTAMPTZ NOT NULL,
    bucket            TEXT NOT NULL DEFAULT '',
    value             DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (consumer, metric, hour, bucket)
);
-- Covering: a window's sums are read from the index alone (after vacuum).
CREATE INDEX consumer_metrics_hourly_by_time ON consumer_metrics_hourly (metric, hour) INCLUDE (bucket, value);
