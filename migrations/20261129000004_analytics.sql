-- Read models for look-ups and analytics, filled by the `reservations_view` and
-- `occupancy` projections (projections/src/analytics.rs) from the event log.
--
-- Every table carries `generation` as the first column of its primary key: a rebuild
-- fills generation N+1 from position zero while readers keep using N (the generation
-- named in projection_checkpoints), then switches in one commit and deletes N. Nothing
-- here is authoritative: the write side's tables and CHECKs decide; these rows can always
-- be thrown away and rebuilt from the events.

-- One row per reservation: the look-ups a support desk or a channel needs (by channel,
-- by guest email, by hotel and date) without touching the write side's rows.
-- `status` is the recorded status; a held reservation whose hold_expires_at has passed
-- reads as expired, which readers derive at read time (as the write side's view does).
-- `version` is the sequence of the last event of the reservation's stream applied here:
-- an event at or below it is a repeat and changes nothing.
CREATE TABLE reservations_view (
    generation      integer NOT NULL,
    reservation_id  uuid    NOT NULL,
    hotel_id        bigint  NOT NULL,
    room_type_id    bigint  NOT NULL,
    start_date      date    NOT NULL,
    end_date        date    NOT NULL,
    rooms           integer NOT NULL,
    status          text    NOT NULL,
    guest_name      text    NOT NULL,
    guest_email     text    NOT NULL,
    channel         text    NOT NULL,
    total_cents     bigint  NOT NULL,
    hold_expires_at timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    version         bigint  NOT NULL,
    PRIMARY KEY (generation, reservation_id)
);
-- A channel's reservations, newest first.
CREATE INDEX reservations_view_by_channel
    ON reservations_view (generation, channel, created_at DESC);
-- A guest's reservations (emails are stored lower-case, as the domain normalises them).
CREATE INDEX reservations_view_by_guest_email
    ON reservations_view (generation, guest_email);
-- Stays at a hotel around a date: start_date <= date AND end_date > date scans the
-- hotel's stays that started by then.
CREATE INDEX reservations_view_by_hotel_date
    ON reservations_view (generation, hotel_id, start_date);

-- Daily occupancy and revenue: one row per (hotel, room type, night) that has had
-- inventory, i.e. per RoomNight stream.
--   total_rooms, overbooking_allowance, rate_cents: the night's current inventory;
--   confirmed, held: rooms sold / on hold now (as room_nights counts them);
--   revenue_cents: sum over the night's confirmed allocations of rooms x the night's
--     rate when each was confirmed (a cancellation takes back exactly what its
--     confirmation added; see occupancy_confirmations);
--   holds_placed, holds_lapsed: rooms ever put on hold / whose hold lapsed on this night;
--   cancellations: rooms given back on this night by cancelled reservations (held or
--     confirmed); rooms moved away by a change of dates are not cancellations.
-- The cumulative counters are bigint: they only grow. `version` is the sequence of the
-- night stream's last event applied, so a repeated event changes nothing.
CREATE TABLE occupancy_daily (
    generation            integer NOT NULL,
    hotel_id              bigint  NOT NULL,
    room_type_id          bigint  NOT NULL,
    night                 date    NOT NULL,
    total_rooms           integer NOT NULL DEFAULT 0,
    overbooking_allowance integer NOT NULL DEFAULT 0,
    rate_cents            bigint  NOT NULL DEFAULT 0,
    confirmed             integer NOT NULL DEFAULT 0,
    held                  integer NOT NULL DEFAULT 0,
    revenue_cents         bigint  NOT NULL DEFAULT 0,
    holds_placed          bigint  NOT NULL DEFAULT 0,
    holds_lapsed          bigint  NOT NULL DEFAULT 0,
    cancellations         bigint  NOT NULL DEFAULT 0,
    version               bigint  NOT NULL,
    PRIMARY KEY (generation, hotel_id, room_type_id, night)
);

-- What each confirmed allocation added to its night's revenue: one row per
-- (night, reservation) while the reservation holds confirmed rooms there. Rates change
-- over time, so releasing a confirmed allocation subtracts this stored amount rather than
-- rooms x today's rate; revenue then stays the exact sum of what is sold.
CREATE TABLE occupancy_confirmations (
    generation     integer NOT NULL,
    hotel_id       bigint  NOT NULL,
    room_type_id   bigint  NOT NULL,
    night          date    NOT NULL,
    reservation_id uuid    NOT NULL,
    rooms          integer NOT NULL,
    revenue_cents  bigint  NOT NULL,
    PRIMARY KEY (generation, hotel_id, room_type_id, night, reservation_id)
);
