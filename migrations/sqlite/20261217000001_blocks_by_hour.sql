-- Per-consumer and team objectives read every selected consumer's six-hour
-- blocks inside a window at once (store/src/rollup/by_consumer.rs): one
-- range of hours, answered from the index alone.
CREATE INDEX consumer_metrics_6h_by_hour
    ON consumer_metrics_6h (hour, consumer, metric, bucket, value);
