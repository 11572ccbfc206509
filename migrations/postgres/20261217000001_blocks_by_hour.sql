-- Per-consumer and team objectives read every selected consumer's six-hour
-- blocks inside a window at once (store/src/rollup/by_consumer.rs). By
-- (metric, consumer, hour) that is one range per consumer and metric; the
-- planner preferred to read the whole table. By hour, the window's blocks
-- are one range, answered from the index alone.
CREATE INDEX consumer_metrics_6h_by_hour
    ON consumer_metrics_6h (hour) INCLUDE (consumer, metric, bucket, value);
