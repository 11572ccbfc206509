-- Accounts created on first sign-in through OpenID Connect. They are a
-- third origin beside password and proxy accounts, never merged with
-- either by name; `subject` is the provider's issuer and `sub` claim of
-- the person the account was made for, so a name that the directory later
-- hands to someone else does not sign them in as the first person.
ALTER TABLE users DROP CONSTRAINT users_origin_check;
ALTER TABLE users ADD CONSTRAINT users_origin_check
    CHECK (origin IN ('password', 'proxy', 'oidc'));
ALTER TABLE users ADD COLUMN subject TEXT;
CREATE UNIQUE INDEX users_by_subject ON users (subject) WHERE subject IS NOT NULL;
