-- Turnaways gain a fourth reason, `block_exhausted`: a hold booked from a group block
-- none of whose rooms were left on a night. It was logged as `sold_out`, which it is
-- not (the block is full; general sale may have rooms left), and the what-if re-decides
-- a `sold_out` turnaway against general sale, so a larger allowance "sold" a request
-- only the block could have taken. Rows logged before keep the reason they were given.
-- Checking the existing rows locks the table a moment: only the batched writer, off the
-- request path, waits.
ALTER TABLE turnaways DROP CONSTRAINT turnaways_reason_check;
ALTER TABLE turnaways ADD CONSTRAINT turnaways_reason_check
    CHECK (reason IN ('sold_out', 'restricted', 'occupancy', 'block_exhausted'));
