-- The write side: the event log, the inline state the unit of work loads and checks,
-- and the idempotency records. Everything a command changes is written in ONE
-- transaction across these tables.

-- The event log. The first seven columns are exactly postgres-es's, so its
-- PostgresEventRepository can read any stream unchanged; the primary key
-- (aggregate_type, aggregate_id, sequence) is the optimistic lock: two writers that
-- decided against the same version of a stream cannot both append.
CREATE TABLE events (
    aggregate_type  text   NOT NULL,
    aggregate_id    text   NOT NULL,
    sequence        bigint NOT NULL CHECK (sequence >= 1),
    event_type      text   NOT NULL,
    event_version   text   NOT NULL,
    payload         jsonb  NOT NULL,
    metadata        jsonb  NOT NULL,
    -- Commit-order reading for projections: a position alone is not enough, because
    -- identities are handed out before commit and transactions commit out of order.
    -- Readers take events whose transaction_id is below pg_snapshot_xmin of their
    -- snapshot, ordered by (transaction_id, global_position), and never skip one.
    global_position bigint GENERATED ALWAYS AS IDENTITY,
    transaction_id  xid8   NOT NULL DEFAULT pg_current_xact_id(),
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (aggregate_type, aggregate_id, sequence)
);
CREATE UNIQUE INDEX events_global_position ON events (global_position);
CREATE INDEX events_commit_order ON events (transaction_id, global_position);

-- Catalog: inline state of the Hotel aggregate. `state` is the serialized aggregate,
-- `version` the sequence of the stream's last event.
CREATE TABLE hotels (
    hotel_id   bigint PRIMARY KEY CHECK (hotel_id > 0),
    name       text   NOT NULL,
    city       text   NOT NULL,
    timezone   text   NOT NULL,
    state      jsonb  NOT NULL,
    version    bigint NOT NULL CHECK (version >= 1),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX hotels_by_city ON hotels (lower(city));

CREATE TABLE room_types (
    hotel_id      bigint NOT NULL REFERENCES hotels (hotel_id),
    room_type_id  bigint NOT NULL CHECK (room_type_id > 0),
    name          text   NOT NULL,
    max_occupancy integer NOT NULL CHECK (max_occupancy > 0),
    PRIMARY KEY (hotel_id, room_type_id)
);

-- Inline state of every RoomNight stream: the snapshot the unit of work loads instead of
-- replaying a hot night's hundreds of events, and the last line of defence. If
-- application code ever decides wrong, these CHECKs refuse the commit: an oversold
-- night cannot be written, by us or by anyone with plain SQL.
CREATE TABLE room_nights (
    hotel_id              bigint  NOT NULL,
    room_type_id          bigint  NOT NULL,
    night                 date    NOT NULL,
    total_rooms           integer NOT NULL CHECK (total_rooms >= 0),
    overbooking_allowance integer NOT NULL CHECK (overbooking_allowance >= 0),
    rate_cents            bigint  NOT NULL CHECK (rate_cents >= 0),
    -- rooms sold and paid for / rooms on hold (lapsed holds count until dropped, so the
    -- stored counters are exact)
    confirmed             integer NOT NULL DEFAULT 0 CHECK (confirmed >= 0),
    held                  integer NOT NULL DEFAULT 0 CHECK (held >= 0),
    -- sequence of the stream's last event; the optimistic strategy's compare-and-set
    version               bigint  NOT NULL CHECK (version >= 1),
    PRIMARY KEY (hotel_id, room_type_id, night),
    FOREIGN KEY (hotel_id, room_type_id) REFERENCES room_types (hotel_id, room_type_id),
    CONSTRAINT room_nights_not_oversold
        CHECK (confirmed + held <= total_rooms + overbooking_allowance)
);

-- Who holds or has bought what on each night: one row per (night, reservation). The
-- counters in room_nights are the sums of these rows. The unit of work loads only the
-- rows a command can touch (the reservation's own and the lapsed holds), which keeps a
-- flash-sale night with thousands of holds cheap to decide on.
CREATE TABLE room_night_allocations (
    hotel_id       bigint  NOT NULL,
    room_type_id   bigint  NOT NULL,
    night          date    NOT NULL,
    reservation_id uuid    NOT NULL,
    rooms          integer NOT NULL CHECK (rooms > 0),
    -- NULL for a confirmed allocation; the hold's expiry otherwise
    expires_at     timestamptz,
    PRIMARY KEY (hotel_id, room_type_id, night, reservation_id),
    FOREIGN KEY (hotel_id, room_type_id, night) REFERENCES room_nights (hotel_id, room_type_id, night)
);
CREATE INDEX room_night_allocations_lapsing
    ON room_night_allocations (hotel_id, room_type_id, night, expires_at)
    WHERE expires_at IS NOT NULL;

-- Inline state of every Reservation stream, for read-your-writes look-ups and as the
-- snapshot the unit of work loads. `state` is the serialized aggregate.
CREATE TABLE reservations (
    reservation_id  uuid PRIMARY KEY,
    stream_id       text   NOT NULL UNIQUE,
    hotel_id        bigint NOT NULL,
    room_type_id    bigint NOT NULL,
    start_date      date   NOT NULL,
    end_date        date   NOT NULL,
    rooms           integer NOT NULL CHECK (rooms > 0),
    status          text   NOT NULL
        CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired', 'declined')),
    guest_name      text   NOT NULL,
    guest_email     text   NOT NULL,
    channel         text   NOT NULL,
    total_cents     bigint NOT NULL CHECK (total_cents >= 0),
    hold_expires_at timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    state           jsonb  NOT NULL,
    version         bigint NOT NULL CHECK (version >= 1),
    CHECK (end_date > start_date)
);
CREATE INDEX reservations_held_by_expiry ON reservations (hold_expires_at) WHERE status = 'held';

-- Idempotency records: one per (client, key). A request claims its key in the same
-- transaction that writes its events, and stores its outcome there, so a retry either
-- finds the finished outcome or finds nothing and runs again; never half of one.
-- `request_hash` tells a true retry from a key reused for a different request.
-- `state` is 'completed' for outcomes written with the command, 'in_flight' for requests
-- that span more than one transaction (a payment), 'abandoned' when a sweeper gave up on
-- one. `outcome` is the command's typed result (success or rejection) as JSON; a replay
-- renders it again, so the client sees the first response unchanged. Records are kept
-- for 24 hours.
CREATE TABLE idempotency_keys (
    client          text  NOT NULL,
    key             text  NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_hash    text  NOT NULL,
    state           text  NOT NULL CHECK (state IN ('in_flight', 'completed', 'abandoned')),
    outcome         jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
