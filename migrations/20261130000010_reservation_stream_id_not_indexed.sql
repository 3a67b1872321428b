-- `reservations.stream_id` loses its UNIQUE constraint (and so its index).
--
-- The stream id is derived from the hotel and the reservation id, which is the primary
-- key, so it is unique without being checked; nothing looks a reservation up by it.
-- The index cost every hold an insert at a random place in a large b-tree, and after
-- each checkpoint a full-page image in the WAL for every leaf page so touched
-- (pg_waldump under spread load: 70% of the WAL was full-page images, most of them of
-- b-tree leaves).
ALTER TABLE reservations DROP CONSTRAINT reservations_stream_id_key;
