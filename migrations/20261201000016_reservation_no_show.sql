-- Staff record that a guest never came (the reservation's status `no_show`; every night
-- after the first goes back to sale). As in migrations 14 and 15, the write side's CHECK
-- gains the status with the code that writes it.
ALTER TABLE reservations DROP CONSTRAINT reservations_status_check;
ALTER TABLE reservations ADD CONSTRAINT reservations_status_check
    CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired', 'declined', 'checked_in',
                      'checked_out', 'no_show'));
