-- A reservation's currency and taxes on the read side.
--
-- A reservation keeps the currency its hotel priced in and the taxes in force when it
-- was sold (in its ReservationHeld event). The reservations view keeps both, so the
-- look-up answers with the same `currency`, `taxes` and `total_due_cents` as the
-- reservation itself: `taxes` holds the rules (NULL: none), from which the stay's lines
-- are computed as the write side computes them. Rows of stays sold before hotels had a
-- currency read as euros, which is what they were.
ALTER TABLE reservations_view
    ADD COLUMN currency text NOT NULL DEFAULT 'EUR',
    ADD COLUMN taxes jsonb;

-- The currency a payment saga authorizes in (the reservation's), so that a saga
-- recovered after a crash asks the provider for the same amount in the same currency.
ALTER TABLE payment_sagas ADD COLUMN currency text NOT NULL DEFAULT 'EUR';
