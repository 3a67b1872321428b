-- The front desk's departures: a hotel's stays that end on a date. Arrivals use the
-- (generation, hotel_id, start_date) index; without this one, a departures list would
-- read every stay the hotel ever had that started before the date.
CREATE INDEX reservations_view_by_hotel_end_date
    ON reservations_view (generation, hotel_id, end_date);
