-- The payment ledger: a confirmation authorizes the card and no longer captures it; the
-- capture comes at the cancellation policy's full-refund deadline (or at once for a
-- non-refundable stay, or at check-in), and a cancellation before it voids instead of
-- refunding. Each movement is an event of the reservation (PaymentCaptured,
-- PaymentVoided, PaymentRefunded, AuthorizationIncreased) carrying its gateway key.

-- When each open authorization is due to be captured: the capture worker's queue. The
-- write side keeps it in the transaction of the events that set, move or end the
-- deadline (a confirmation, a date change, the capture, a void), so a row exists
-- exactly while a capture is owed. The worker takes due rows and runs the capture
-- command; the reservation's own state decides, so two workers on one row capture once.
CREATE TABLE payment_captures_due (
    reservation_id uuid PRIMARY KEY,
    due_at         timestamptz NOT NULL
);
CREATE INDEX payment_captures_due_by_time ON payment_captures_due (due_at);

-- The no-show worker's candidates: confirmed stays by arrival date (it then judges each
-- by its hotel's own date and the grace it is given).
CREATE INDEX reservations_confirmed_by_arrival ON reservations (start_date)
    WHERE status = 'confirmed';

-- Every reservation answer carries its payment: the reservations view follows the
-- ledger's events.
--   payment_status: none | authorized | captured | voided | refunded | partially_refunded
--   authorized_cents: the authorization and its increments;
--   captured_cents, refunded_cents: what was taken, and given back of it;
--   paid_before_ledger: confirmed before the ledger existed (captured at confirmation,
--     its cancellation's refund carried by ReservationCancelled alone, not by a
--     PaymentRefunded), so the projection knows which event moves its money.
ALTER TABLE reservations_view
    ADD COLUMN payment_status     text    NOT NULL DEFAULT 'none',
    ADD COLUMN authorized_cents   bigint  NOT NULL DEFAULT 0,
    ADD COLUMN captured_cents     bigint  NOT NULL DEFAULT 0,
    ADD COLUMN refunded_cents     bigint  NOT NULL DEFAULT 0,
    ADD COLUMN paid_before_ledger boolean NOT NULL DEFAULT false;

-- Rows already here were paid under the old rule: captured in full at confirmation,
-- and a cancellation refunded its share. Read that from their events once, in every
-- generation, as the domain reads such a history (a confirmation without a capture
-- deadline was captured at once).
UPDATE reservations_view v
   SET authorized_cents = p.amount,
       captured_cents = p.amount,
       refunded_cents = coalesce(c.refund, 0),
       paid_before_ledger = true,
       payment_status = CASE
           WHEN coalesce(c.refund, 0) = 0 THEN 'captured'
           WHEN c.refund >= p.amount THEN 'refunded'
           ELSE 'partially_refunded' END
  FROM (SELECT aggregate_id,
               (payload -> 'ReservationConfirmed' -> 'payment' ->> 'amount_cents')::bigint AS amount
          FROM events
         WHERE aggregate_type = 'reservation' AND event_type = 'ReservationConfirmed'
           AND payload -> 'ReservationConfirmed' -> 'payment' IS NOT NULL
           AND payload -> 'ReservationConfirmed' -> 'capture_due_at' IS NULL) p
  LEFT JOIN (SELECT aggregate_id,
                    (payload -> 'ReservationCancelled' ->> 'refund_cents')::bigint AS refund
               FROM events
              WHERE aggregate_type = 'reservation'
                AND event_type = 'ReservationCancelled') c
         ON c.aggregate_id = p.aggregate_id
 WHERE p.aggregate_id = v.hotel_id::text || ':' || v.reservation_id::text;
