-- Rights limited to teams: `role` stays the highest role a person holds
-- anywhere (what a page's prefix needs); `rights`, when set, says where
-- (`viewer operator@payments`, idem_domain::Rights). NULL: `role` on every
-- consumer, as before.
ALTER TABLE users ADD COLUMN rights TEXT;
