-- Long charts: six-hour blocks of the hourly rollups, so a 28-day chart (drawn
-- in six-hour intervals) reads 112 rows per metric and bucket, not 672.
--
-- Same shape as consumer_metrics_hourly; `hour` is the block's first hour (a
-- whole multiple of six hours since the epoch). Idem rewrites a block from
-- its hourly rows each time it rolls up one of its hours, so a block is
-- complete once the hourly watermark has passed its end; readers take only
-- those and read the rest from hours and minutes.
CREATE TABLE consumer_metrics_6h (
    consumer          TEXT COLLATE "C" NOT NULL,
    metric            TEXT NOT NULL,
    hour              TIMESTAMPTZ NOT NULL,
    bucket            TEXT NOT NULL DEFAULT '',
    value             DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (consumer, metric, hour, bucket)
);
CREATE INDEX consumer_metrics_6h_by_consumer
    ON consumer_metrics_6h (metric, consumer, hour) INCLUDE (bucket, value);
-- The block rewrite selects a span of hours across every consumer and metric.
CREATE INDEX consumer_metrics_hourly_by_hour ON consumer_metrics_hourly (hour);
-- The history's blocks, from the hours already rolled up (the watermark
-- stays). A block the watermark cuts is written in part here and rewritten
-- whole when its remaining hours are rolled up; readers never take it before.
INSERT INTO consumer_metrics_6h (consumer, metric, hour, bucket, value)
SELECT consumer, metric, date_bin('6 hours', hour, TIMESTAMPTZ 'epoch'), bucket, SUM(value)
FROM consumer_metrics_hourly
GROUP BY consumer, metric, date_bin('6 hours', hour, TIMESTAMPTZ 'epoch'), bucket;
