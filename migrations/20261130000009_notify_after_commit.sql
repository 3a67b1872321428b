-- Projection runners are no longer woken by a trigger inside the writing transaction.
--
-- The statement trigger on `events` made every booking transaction NOTIFY. PostgreSQL
-- serializes the commits of notifying transactions on the notification queue's lock,
-- held through each one's WAL flush, and signals every listening backend per commit.
-- Measured with four runners listening, spread holds at 32 clients: 759/s with the
-- trigger, 1,139/s without it. Each server process now announces its commits itself,
-- after they commit, with at most one `NOTIFY events` every few milliseconds from a
-- connection of its own (`src/write/announce.rs`). Runners still LISTEN on `events` and
-- still poll, so a wake-up that never comes costs latency, never an event.
DROP TRIGGER events_appended ON events;
DROP FUNCTION notify_events_appended();
