-- The consumers teams already run.
--
-- Support quotes a provider reference (claims_by_provider_ref serves it) or
-- a message id: a dead letter is found by its message id exactly.
CREATE INDEX dead_letters_by_message_id ON dead_letters (message_id);

-- An adapter over a team table that keeps outcomes declares the function
-- that writes a resolution back into that table (see
-- adapters/postgres/reminder_store.sql); Idem calls it in the resolution's
-- own transaction, beside the audit row. No row: resolving is Idem's alone.
CREATE TABLE adapter_write_backs (
    consumer          TEXT PRIMARY KEY,
    resolve_function  TEXT NOT NULL
);

-- Dead letters moved out of a broker's dead-letter queue (RabbitMQ).
-- broker_ref: the broker's message, so one delivered again after Idem died
-- between its commit and its acknowledgement is stored once. death_*: the
-- broker's facts about the death (x-death): where the message was first
-- published, why it died, how often, when. properties: the AMQP properties
-- and headers a replay publishes again (JSON).
ALTER TABLE dead_letters ADD COLUMN broker TEXT;
ALTER TABLE dead_letters ADD COLUMN broker_ref TEXT;
ALTER TABLE dead_letters ADD COLUMN death_exchange TEXT;
ALTER TABLE dead_letters ADD COLUMN death_routing_key TEXT;
ALTER TABLE dead_letters ADD COLUMN death_reason TEXT;
ALTER TABLE dead_letters ADD COLUMN death_count BIGINT;
ALTER TABLE dead_letters ADD COLUMN death_at INTEGER;
ALTER TABLE dead_letters ADD COLUMN properties TEXT;
CREATE UNIQUE INDEX dead_letters_by_broker_ref ON dead_letters (consumer, broker_ref)
    WHERE broker_ref IS NOT NULL;

-- Idem publishes the replays of a broker's dead letters itself. An attempt
-- leases its outbox row (publishing_until), so two replicas — or a
-- person's "publish again" and the background relay — never publish one
-- row at once; a failed attempt sets when the relay tries again.
ALTER TABLE outbox ADD COLUMN publishing_until INTEGER;
ALTER TABLE outbox ADD COLUMN next_attempt_at INTEGER;
-- The relay finds those still unpublished without walking the backlog of
-- application rows other relays have not published yet.
CREATE INDEX outbox_unpublished_replays ON outbox (created_at, id)
    WHERE published_at IS NULL AND dead_letter_id IS NOT NULL;
