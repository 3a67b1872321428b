-- The payment side: the saga's step log, the webhook receipts, and the outbox of calls
-- to the gateway that must happen once, after the transaction that decided them.
--
-- No transaction ever spans a call to the gateway. Confirming is
--   T1: check the hold is live, write the saga row ('authorizing'), commit;
--   call the gateway with the key '{reservation}:auth' (the gateway deduplicates by it);
--   T2: confirm, or release the nights on decline, and resolve the saga row.
-- A process that dies between the steps leaves the row 'authorizing' with its lease run
-- out; the recovery worker asks the gateway what happened under the same key and
-- finishes the saga.

CREATE TABLE payment_sagas (
    reservation_id   uuid   PRIMARY KEY,
    hotel_id         bigint NOT NULL,
    -- the key the gateway deduplicates the authorization by: '{reservation}:auth'
    gateway_key      text   NOT NULL UNIQUE,
    payment_token    text   NOT NULL,
    amount_cents     bigint NOT NULL CHECK (amount_cents >= 0),
    state            text   NOT NULL
        CHECK (state IN ('authorizing', 'confirmed', 'declined', 'refunded', 'abandoned')),
    provider_txn_id  text,
    -- the client request waiting on this saga (its idempotency record is 'in_flight');
    -- whoever resolves the saga stores the request's outcome there
    client           text,
    client_key       text,
    request_hash     text,
    attempts         integer NOT NULL DEFAULT 1,
    -- nobody else touches an 'authorizing' saga before this: the request that started
    -- it is still waiting on the gateway
    lease_until      timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
CREATE INDEX payment_sagas_open ON payment_sagas (lease_until) WHERE state = 'authorizing';

-- Every webhook the gateway delivered, once per provider transaction: a repeat finds its
-- row and is acknowledged without touching the reservation. Written in the transaction
-- that applied it, so a crash cannot record a webhook that was never applied.
CREATE TABLE payment_webhooks (
    provider_txn_id text   PRIMARY KEY,
    reservation_id  uuid   NOT NULL,
    status          text   NOT NULL CHECK (status IN ('authorized', 'declined')),
    amount_cents    bigint NOT NULL,
    -- what applying it did: confirmed, refunded, declined or ignored (already known)
    result          text   NOT NULL,
    received_at     timestamptz NOT NULL
);

-- Calls to the gateway decided by a committed event: capture a confirmed payment,
-- refund a cancellation, void an authorization that cannot be kept. A row is written in
-- the same transaction as the event that decided it, and its gateway key is unique, so
-- each happens once even if delivery is retried; rows of one reservation are delivered
-- in order (a refund never overtakes the capture it refunds).
CREATE TABLE payment_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    reservation_id  uuid   NOT NULL,
    operation       text   NOT NULL CHECK (operation IN ('capture', 'refund', 'void')),
    provider_txn_id text   NOT NULL,
    amount_cents    bigint NOT NULL CHECK (amount_cents >= 0),
    gateway_key     text   NOT NULL UNIQUE,
    created_at      timestamptz NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    -- due time, and the lease of the worker delivering it
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    -- when the gateway acknowledged it; 'failed' rows gave up and need a person
    done_at         timestamptz,
    failed          boolean NOT NULL DEFAULT false
);
CREATE INDEX payment_outbox_due ON payment_outbox (next_attempt_at) WHERE done_at IS NULL AND NOT failed;
CREATE INDEX payment_outbox_by_reservation ON payment_outbox (reservation_id, id);
