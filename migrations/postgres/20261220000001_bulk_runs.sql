-- Bulk discard and bulk resolve run on the redrive's machinery: a run has a
-- kind (replay: a redrive; discard: dead letters whose key is already sent;
-- resolve: unknown outcomes settled as `resolve_as`), the reason its items'
-- audit rows carry, and items that name a key (with the claim version the
-- starter saw and, to resolve as sent, the provider's reference) as well as
-- dead letters.
ALTER TABLE redrives ADD COLUMN kind TEXT NOT NULL DEFAULT 'replay'
    CHECK (kind IN ('replay', 'discard', 'resolve'));
ALTER TABLE redrives ADD COLUMN resolve_as TEXT
    CHECK (resolve_as IN ('sent', 'failed-retry', 'failed'));
ALTER TABLE redrives ADD COLUMN reason TEXT;

ALTER TABLE redrive_items ALTER COLUMN dead_letter_id DROP NOT NULL;
ALTER TABLE redrive_items ADD COLUMN consumer TEXT;
ALTER TABLE redrive_items ADD COLUMN idempotency_key TEXT;
ALTER TABLE redrive_items ADD COLUMN version BIGINT;
ALTER TABLE redrive_items ADD COLUMN provider_ref TEXT;
UPDATE redrive_items i SET consumer = d.consumer, idempotency_key = d.idempotency_key
    FROM dead_letters d WHERE d.id = i.dead_letter_id;
UPDATE redrive_items SET consumer = '', idempotency_key = '' WHERE consumer IS NULL;
ALTER TABLE redrive_items ALTER COLUMN consumer SET NOT NULL;
ALTER TABLE redrive_items ALTER COLUMN idempotency_key SET NOT NULL;
ALTER TABLE redrive_items DROP CONSTRAINT redrive_items_outcome_check;
ALTER TABLE redrive_items ADD CONSTRAINT redrive_items_outcome_check
    CHECK (outcome IN ('replayed', 'skipped', 'discarded', 'resolved'));
