-- The audit log keeps what tamper evidence needs, and no second copy of every event
-- (it was the largest table: about 700 bytes an event, more than the events
-- themselves; see docs/scaling.md). A row now names its event — position, commit
-- (transaction_id), stream, sequence and type, so a report says what changed — and
-- holds the chain hash of the event as it was first read:
--   hash = SHA-256(previous row's hash || canonical bytes of the event)
-- exactly as before, so the chain already written stays valid. Verify recomputes each
-- hash from the event as it is in `events` now: a changed, removed or inserted event
-- (or audit row) no longer matches. prev_hash is the previous row's hash, which verify
-- walks anyway, so it goes too.
--
-- The dropped columns' space is reclaimed as the table is rewritten; an existing
-- deployment that wants it back at once runs `VACUUM FULL audit_log` (allowed: the
-- append-only trigger refuses UPDATE, DELETE and TRUNCATE only).
DROP INDEX audit_log_stream;
ALTER TABLE audit_log
    DROP COLUMN event_version,
    DROP COLUMN payload,
    DROP COLUMN metadata,
    DROP COLUMN recorded_at,
    DROP COLUMN prev_hash;

-- Verify now replays the streams from `events`, stream by stream, in byte order of the
-- stream id (the order it reads room_nights in, to merge the two), through the primary
-- key. In the "C" collation that order is the index's own; equality, which is all the
-- write side asks of these columns, does not depend on the collation. (Only the indexes
-- are rebuilt: text to text is no rewrite of the table.)
ALTER TABLE events
    ALTER COLUMN aggregate_type TYPE text COLLATE "C",
    ALTER COLUMN aggregate_id TYPE text COLLATE "C";
