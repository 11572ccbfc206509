-- The audit page (/audit) lists the log newest first, filtered by actor, by
-- action or by key (under any consumer). Each filter gets an index that leads
-- with it and continues in the page's order (at, id), so a filtered page reads
-- a page of index entries; the unfiltered list reads audit_log_by_time
-- backwards. audit_log_by_key (consumer, key, at) stays for the key page.
DROP INDEX audit_log_by_actor;
CREATE INDEX audit_log_by_actor ON audit_log (actor, at, id);
CREATE INDEX audit_log_by_action ON audit_log (action, at, id);
CREATE INDEX audit_log_by_key_alone ON audit_log (idempotency_key, at, id);
