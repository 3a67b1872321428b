-- The staff console's "reservations made per minute" chart reads the reservations
-- view by creation time over the last hour or so: without this index that is a scan
-- of the whole view on every refresh.
CREATE INDEX reservations_view_by_created
    ON reservations_view (generation, created_at);
