-- Reservations of several room types on the read side.
--
-- A reservation's first room type stays in `room_type_id`, `guests`, `rate_plan_id` and
-- `cancellation_policy`, as before; `more_lines` holds the others (room type, rooms,
-- guests, plan, policy and price each, as the ReservationHeld event records them; NULL:
-- a reservation of one room type, which every row before this one is). `rooms` is every
-- line's rooms, as the reservation's answer gives it.
ALTER TABLE reservations_view ADD COLUMN more_lines jsonb;
