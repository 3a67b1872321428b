-- The stay goes on past its confirmation: staff check the guest in on a day of the stay
-- (the reservation's status `checked_in`, its nights still sold). The write side's row
-- keeps the status it answers with, and its CHECK lists every status the domain has;
-- this adds the new one. The statuses the lifecycle will add after it (checked out, no
-- show) are added with the code that writes them, so the constraint never admits a
-- status nothing can mean yet.
ALTER TABLE reservations DROP CONSTRAINT reservations_status_check;
ALTER TABLE reservations ADD CONSTRAINT reservations_status_check
    CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired', 'declined', 'checked_in'));
