-- A redrive started through the API by a token: `account` is the account
-- whose standing each step reads again (the token's owner; NULL: the
-- account named `actor`), `token_id` the token, which must still be live
-- for each step (NULL: started by a person).
ALTER TABLE redrives ADD COLUMN account TEXT;
ALTER TABLE redrives ADD COLUMN token_id BIGINT;
CREATE INDEX redrives_by_audit ON redrives (audit_id);
