-- The audit log: a hash-chained, append-only copy of the event log, written by the
-- `audit_log` projection (projections/src/audit.rs) and checked by
-- `reservations audit verify` and `GET /v1/audit/verify`.
--
-- Why a copy: the events table is the write side's working store, and anyone with SQL
-- can change a row of it. The audit log keeps each event as it was first read, chained
-- by SHA-256, so a changed, removed or inserted row (in either table) shows up when the
-- two are verified against each other and against the chain.

-- One row per event, in the order the projection read them (commit order).
--   seq        the chain index: contiguous from 1, so a removed row leaves a visible gap;
--   position   the event's events.global_position (each event appears once);
--   prev_hash  the previous row's hash (32 zero bytes for seq 1);
--   hash       SHA-256(prev_hash || canonical bytes of this row's event), the canonical
--              form being the deterministic JSON that projections/src/audit.rs defines.
-- The other columns copy the event as stored in `events`.
CREATE TABLE audit_log (
    seq             bigint      PRIMARY KEY CHECK (seq >= 1),
    position        bigint      NOT NULL UNIQUE,
    transaction_id  xid8        NOT NULL,
    aggregate_type  text        NOT NULL,
    aggregate_id    text        NOT NULL,
    sequence        bigint      NOT NULL,
    event_type      text        NOT NULL,
    event_version   text        NOT NULL,
    payload         jsonb       NOT NULL,
    metadata        jsonb       NOT NULL,
    recorded_at     timestamptz NOT NULL,
    prev_hash       bytea       NOT NULL CHECK (octet_length(prev_hash) = 32),
    hash            bytea       NOT NULL CHECK (octet_length(hash) = 32)
);

-- Verify replays stream by stream, in the order of this index, so it reads the log
-- already sorted (no sort of the whole history) and holds one stream in memory at a
-- time. The "C" collation makes the order byte order, which is also Rust's string
-- order and the order verify reads `room_nights` in, so the replayed nights and the
-- rows can be compared by merging two sorted streams. Unique: a stream has one event
-- per sequence number.
CREATE UNIQUE INDEX audit_log_stream
    ON audit_log (aggregate_type COLLATE "C", aggregate_id COLLATE "C", sequence);

-- Append-only: any UPDATE, DELETE or TRUNCATE is refused. A statement-level trigger
-- refuses even a statement that would touch no row, so no code path "happens" to work.
-- This stops mistakes and application-level tampering; a superuser can still disable
-- the trigger, and that is what the hash chain and `verify` are for.
CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change();
