-- The reservations view answers for a reservation what the write side answers: the
-- rate plan it was sold under, the cancellation policy it was sold under and the guests
-- per room. The contract says every answer about a reservation carries its plan and
-- its policy, and a policy is a snapshot taken when the stay is held (a later change to
-- the plan does not reach it), so it can only come from the reservation's own
-- ReservationHeld, never from the catalog at read time. All three are fixed by that
-- event; the projection writes them with the row and no later event changes them.
--   rate_plan_id: NULL when the stay was sold at the base rate.
--   guests: per room; 1 for stays held before guests were counted, as the event's own
--     default says.
--   cancellation_policy: the domain's JSON of the policy (a CancellationPolicy:
--     {"Refundable": {...}} or "NonRefundable"); NULL means the house policy, the one
--     every stay held before rate plans existed was sold under.
ALTER TABLE reservations_view
    ADD COLUMN rate_plan_id        bigint,
    ADD COLUMN guests              integer NOT NULL DEFAULT 1,
    ADD COLUMN cancellation_policy jsonb;

-- The rows already here were written without these columns, including those of stays
-- held under a plan since the write side began recording plans: left at the defaults
-- they would read as sold at the base rate under the house policy. Fill them, in every
-- generation (a rebuild may be filling the next one), from each reservation's
-- ReservationHeld, the first event of its stream, where it records any of the three;
-- the others were held before plans and guests existed and the defaults are what their
-- events mean. This reads the events once, here, instead of making every server rebuild
-- the view on its next start. A server of the previous build still following the log
-- after this has run writes its new rows without them; `reservations projections
-- rebuild reservations_view` once those servers are gone rewrites every row.
UPDATE reservations_view v
   SET rate_plan_id = (h.sold ->> 'rate_plan_id')::bigint,
       guests = coalesce((h.sold ->> 'guests')::integer, 1),
       cancellation_policy = h.sold -> 'cancellation_policy'
  FROM (SELECT aggregate_id, payload -> 'ReservationHeld' AS sold
          FROM events
         WHERE aggregate_type = 'reservation' AND sequence = 1
           AND event_type = 'ReservationHeld') h
 WHERE h.aggregate_id = v.hotel_id::text || ':' || v.reservation_id::text
   AND h.sold ?| ARRAY['rate_plan_id', 'guests', 'cancellation_policy'];
