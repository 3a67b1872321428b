-- What shapes a night's sale besides its rooms: the restrictions revenue managers set
-- (minimum stay, closed to arrival, stop-sell, ...) and the own rates of rate plans
-- priced on their own. They are part of the RoomNight aggregate's state, changed by its
-- RestrictionsSet and PlanRateSet events, and kept inline here like its counters, so the
-- unit of work that takes a night's rooms reads them in the same row, under the same
-- lock and version check: a restriction recorded before a booking is decided is seen by
-- it, and one recorded after cannot slip in between its read and its write.
--
-- Both are the aggregate's own JSON (a RestrictionSet: {"all": {...}, "plans": {"2":
-- {...}}}; plan rates: {"2": 15000}) and NULL when empty, which most nights are: a
-- booking of such a night reads and writes nothing more than before.
ALTER TABLE room_nights
    ADD COLUMN restrictions jsonb,
    ADD COLUMN plan_rates   jsonb;
