-- Key browsing: the lookups the key page and the key search make.

CREATE INDEX claims_by_provider_ref ON claims (provider_ref) WHERE provider_ref IS NOT NULL;
CREATE INDEX claims_by_consumer_activity ON claims (consumer, last_delivery_at, idempotency_key);
