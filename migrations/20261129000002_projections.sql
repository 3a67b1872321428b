-- The read side's bookkeeping: where each projection has got to in the event log, and a
-- wake-up call for projection runners when events are appended.

-- One row per projection. The checkpoint is the (transaction_id, global_position) of the
-- last event applied: the log is read in that order, and only below
-- pg_snapshot_xmin(pg_current_snapshot()), so no event can later appear before a
-- checkpoint (positions alone would skip events whose transaction committed late).
-- `generation` names the storage the projection serves from; a rebuild fills the next
-- generation from position zero while the current one keeps serving, then switches.
CREATE TABLE projection_checkpoints (
    name            text   PRIMARY KEY,
    generation      integer NOT NULL DEFAULT 1 CHECK (generation >= 1),
    transaction_id  xid8   NOT NULL DEFAULT '0',
    global_position bigint NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Runners LISTEN on 'events'; one notification per appending statement (not per row)
-- keeps it cheap. Notifications are only a wake-up: runners also poll, so a lost one
-- costs latency, never an event.
CREATE FUNCTION notify_events_appended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('events', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER events_appended
    AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION notify_events_appended();
