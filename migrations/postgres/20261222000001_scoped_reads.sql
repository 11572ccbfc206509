-- Reads for a person limited to some teams, consumer by consumer: each of
-- these leads with the consumer, so a list, a count or a search of the
-- person's consumers reads their own rows, never walking past another
-- team's (store/src/sql.rs, `Sql::each_consumer`). The fleet's reads keep
-- their indexes in time order.
CREATE INDEX claims_unknown_by_consumer ON claims (consumer, status_at, idempotency_key)
    WHERE status = 'unknown';
CREATE INDEX claims_pending_by_consumer ON claims (consumer, status_at, idempotency_key)
    WHERE status = 'pending';
CREATE INDEX claims_failed_by_consumer ON claims (consumer, status_at, idempotency_key)
    WHERE status = 'failed';
CREATE INDEX dead_letters_open_by_consumer ON dead_letters (consumer, dead_lettered_at, id)
    WHERE state = 'open';
CREATE INDEX dead_letters_by_consumer_state ON dead_letters (consumer, state, dead_lettered_at, id);
CREATE INDEX outbox_unpublished_by_consumer ON outbox (consumer, created_at, id)
    WHERE published_at IS NULL;
CREATE INDEX audit_log_by_consumer ON audit_log (consumer, at, id);
