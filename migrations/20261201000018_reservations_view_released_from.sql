-- The stay analytics (arrivals, departures, guests in house, no-shows per night) are read
-- from the reservations view, which knows each stay's dates, rooms and status. What it
-- did not know is where a stay that ended early stopped: the first night a check-out or
-- a no-show gave back to sale (`released_from` of GuestCheckedOut / NoShowRecorded).
-- NULL for every other status. The guests of a checked-out stay were in house on the
-- nights before it, and left on it.
ALTER TABLE reservations_view ADD COLUMN released_from date;

-- Rows already checked out or no-show: read it from their event, in every generation.
UPDATE reservations_view v
   SET released_from = (e.payload -> e.event_type ->> 'released_from')::date
  FROM events e
 WHERE e.aggregate_type = 'reservation'
   AND e.event_type IN ('GuestCheckedOut', 'NoShowRecorded')
   AND e.aggregate_id = v.hotel_id::text || ':' || v.reservation_id::text;
