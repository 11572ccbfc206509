-- Trust, second round.
--
-- A redrive replays what its page offered, acts with its starter's current
-- rights, and its start and stop are bound to their forms' action ids.
-- `offer`: the start form's token (how many letters, the last one, a
-- digest of their ids), so the same action id with another selection is
-- refused. `starter_epoch`: the starter's session epoch when it started; a
-- run whose starter is disabled, demoted or signed out everywhere stops.
-- `end_reason`: why a run stopped when no person stopped it.
ALTER TABLE redrives ADD COLUMN offer TEXT NOT NULL DEFAULT '';
ALTER TABLE redrives ADD COLUMN starter_epoch BIGINT;
ALTER TABLE redrives ADD COLUMN end_reason TEXT;

-- Nothing anonymous writes anything that lasts. A fingerprint is kept only
-- for a key a signed-in person read (the key page's server function
-- records it, not the request span), and only while it is logged: a
-- replica moves `last_logged_at` at most once a day, and rows not logged
-- for 30 days are deleted (app/src/fingerprint.rs).
ALTER TABLE key_fingerprints ADD COLUMN last_logged_at TIMESTAMPTZ;
UPDATE key_fingerprints SET last_logged_at = first_logged_at;
ALTER TABLE key_fingerprints ALTER COLUMN last_logged_at SET NOT NULL;
CREATE INDEX key_fingerprints_by_last_logged ON key_fingerprints (last_logged_at);

-- Requests refused to a signed-in person (a role short of what a page or
-- action needs) or to a name the identity proxy asserts (one that belongs
-- to a password account), counted per actor, reason and 15-minute window
-- and audited once, as failed sign-ins are, when the window has ended.
CREATE TABLE refusal_counts (
    actor         TEXT NOT NULL,
    actor_role    TEXT NOT NULL,
    reason        TEXT NOT NULL,
    window_start  TIMESTAMPTZ NOT NULL,
    refused       INTEGER NOT NULL CHECK (refused > 0),
    -- The first request refused in the window, and from where.
    first_target  TEXT NOT NULL,
    client_addr   TEXT,
    PRIMARY KEY (actor, reason, window_start)
);
CREATE INDEX refusal_counts_by_window ON refusal_counts (window_start);
