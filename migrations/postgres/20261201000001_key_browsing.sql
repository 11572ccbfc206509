-- Key browsing: the lookups the key page and the key search make.

-- "One provider reference on two keys": a flag on the key page.
CREATE INDEX claims_by_provider_ref ON claims (provider_ref) WHERE provider_ref IS NOT NULL;
-- Browsing one consumer's keys, newest activity first.
CREATE INDEX claims_by_consumer_activity ON claims (consumer, last_delivery_at, idempotency_key);
