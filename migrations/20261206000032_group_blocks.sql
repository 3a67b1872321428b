-- Group blocks: rooms of one room type a hotel sets aside for a group over a stay, at a
-- contracted rate, until a release date (docs/api.md, "Group blocks").
--
-- The rooms a block sets aside are each night's, like what is sold: `blocked` counts
-- them (the sum of the night's blocks' unpicked rooms) and the CHECK now counts them
-- beside the confirmed and held rooms, so a night can no more be oversold by a block
-- than by a booking. `blocks` is the RoomNight aggregate's per-block state on the night
-- ({"ACME": {"rooms": 8, "picked_up": 2, "rate_cents": 15000}}), NULL when the night has
-- none, which most nights never do: a booking of such a night reads and writes nothing
-- more than before.
ALTER TABLE room_nights
    ADD COLUMN blocked integer NOT NULL DEFAULT 0 CHECK (blocked >= 0),
    ADD COLUMN blocks  jsonb;
ALTER TABLE room_nights
    DROP CONSTRAINT room_nights_not_oversold,
    ADD CONSTRAINT room_nights_not_oversold
        CHECK (confirmed + held + blocked <= total_rooms + overbooking_allowance);

-- A booking's rooms taken from a block name it: given up, they go back to the block
-- (while it holds) rather than to general sale.
ALTER TABLE room_night_allocations ADD COLUMN block_code text;

-- Inline state of every Block stream (its terms and whether it was released), and what
-- the release worker looks for: the open blocks whose release date has ended at the
-- hotel (`release_at`).
CREATE TABLE blocks (
    hotel_id     bigint      NOT NULL REFERENCES hotels (hotel_id),
    code         text        NOT NULL,
    room_type_id bigint      NOT NULL,
    start_date   date        NOT NULL,
    end_date     date        NOT NULL,
    release_at   timestamptz NOT NULL,
    released     boolean     NOT NULL DEFAULT false,
    state        jsonb       NOT NULL,
    version      bigint      NOT NULL CHECK (version >= 1),
    PRIMARY KEY (hotel_id, code),
    CHECK (end_date > start_date)
);
CREATE INDEX blocks_to_release ON blocks (release_at) WHERE NOT released;

-- The read side's reservations say which block they were booked from (NULL: general
-- sale), as the write side's answer does.
ALTER TABLE reservations_view ADD COLUMN block_code text;
