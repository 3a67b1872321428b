-- Guest e-mail (docs/notifications.md): one row per message a committed event decided,
-- written in the transaction of that event, so a crash keeps both or neither; sent
-- after the commit by the mail worker.
--
-- A row holds no personal data. What the message says (the stay, the price, the
-- policy, the refund) is in `facts`; the recipient is read from the reservation's
-- sealed guest when the message is sent, so erasing a guest leaves nothing to scrub
-- here, and a message not yet sent to an erased guest is dropped, never sent.
CREATE TABLE mail_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    reservation_id  uuid        NOT NULL,
    kind            text        NOT NULL
        CHECK (kind IN ('confirmation', 'cancellation', 'expiry', 'dates_changed', 'no_show')),
    -- the reservation's stream version of the event that decided the message: with the
    -- kind, what makes a message once (a retried command decides no second event)
    version         bigint      NOT NULL,
    facts           jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    -- pending: to send (or being sent: `next_attempt_at` is then the sender's lease);
    -- sent: the mail server took it; failed: given up after retries, a person looks;
    -- dropped: its guest was erased before it went out
    state           text        NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'sent', 'failed', 'dropped')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    sent_at         timestamptz,
    UNIQUE (reservation_id, kind, version)
);
-- The worker's queue (the first pending message of each reservation), and the
-- stalled-work gauges' (oldest pending row).
CREATE INDEX mail_outbox_in_order ON mail_outbox (reservation_id, id) WHERE state = 'pending';
CREATE INDEX mail_outbox_pending_age ON mail_outbox (created_at) WHERE state = 'pending';
CREATE INDEX mail_outbox_failed ON mail_outbox (id) WHERE state = 'failed';

-- The stalled-work gauges and `GET /v1/ops/outbox` count and list the payment calls
-- given up on; few, so a partial index keeps that a look-up as small as they are.
CREATE INDEX payment_outbox_failed ON payment_outbox (id) WHERE failed AND done_at IS NULL;

-- Retention deletes the messages sent (or dropped) more than RETENTION_DAYS ago.
CREATE INDEX mail_outbox_done ON mail_outbox (created_at) WHERE state IN ('sent', 'dropped');

-- The payment outbox's queue reads the first undone row of each reservation (see
-- payments::outbox); its index on all rows would make that a scan of every row kept.
CREATE INDEX payment_outbox_undone ON payment_outbox (reservation_id, id) WHERE done_at IS NULL;
