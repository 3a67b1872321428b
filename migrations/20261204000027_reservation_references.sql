-- Short reservation references, the code a guest reads out on the phone (`K7M29QXD`).
--
-- A reference is the last 40 bits of the reservation's id in Crockford's base 32; a new
-- id ends in a shuffled (bijective) form of a number no other reservation has. The
-- numbers come from this sequence in blocks of 1,000 (block n: numbers 1000n to
-- 1000n + 999), one statement per thousand holds, so that servers never share one and
-- the hold path needs no unique index.
CREATE SEQUENCE reservation_reference_blocks;

-- Finding a reservation by its reference (`GET /v1/reservations?reference=`): the view
-- keeps each row's number (the reference un-shuffled). Numbers grow, so new rows land at
-- the right edge of the index instead of on random leaves. Rows written before this
-- migration have none until the view is rebuilt.
ALTER TABLE reservations_view ADD COLUMN reference_number bigint;
CREATE INDEX reservations_view_by_reference
    ON reservations_view (generation, reference_number);
