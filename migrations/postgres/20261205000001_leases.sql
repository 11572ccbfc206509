-- Work that must run once however many replicas serve (hourly rollups, the
-- demo simulator, the expired-session sweeper) runs under a lease: a row per
-- job naming the replica that holds it until `expires_at`. A holder renews
-- well before expiry; when it stops (or dies), another replica takes the row
-- over once it has expired.
CREATE TABLE idem_leases (
    name              TEXT COLLATE "C" PRIMARY KEY,
    holder            TEXT NOT NULL,
    expires_at        TIMESTAMPTZ NOT NULL
);
