-- Staff check a guest out (the reservation's status `checked_out`; the stay's nights
-- after the day they left go back to sale). As in migration 14, the write side's CHECK
-- lists every status the domain has, and gains the new one with the code that writes it.
ALTER TABLE reservations DROP CONSTRAINT reservations_status_check;
ALTER TABLE reservations ADD CONSTRAINT reservations_status_check
    CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired', 'declined', 'checked_in',
                      'checked_out'));
