-- A guest's keys were indexed twice by guest: `guest_keys_live` (the live key, unique)
-- and `guest_keys_by_guest` (every key). Every query by guest asks for the live key
-- (making one as a guest books, destroying it as they are erased), which the first
-- serves; nothing reads a guest's destroyed keys by guest. The second cost each new
-- guest an index entry (about 77 bytes) and its WAL, on the hold path.
DROP INDEX privacy.guest_keys_by_guest;
