-- Partner webhooks (docs/notifications.md): subscriptions, and the deliveries made for
-- them from the event log.
--
-- Subscriptions are settings an admin PUTs, not domain facts, so they are a table, not
-- a stream. `event_types` holds the contract's types or '*'; `hotel_ids` NULL means
-- every hotel. A subscriber whose deliveries keep failing is paused (`paused_at`): its
-- deliveries are still made, and wait, until an admin PUTs it again.
CREATE TABLE webhook_subscriptions (
    subscription_id      text PRIMARY KEY CHECK (subscription_id ~ '^[A-Za-z0-9_.-]{1,64}$'),
    url                  text        NOT NULL,
    event_types          text[]      NOT NULL,
    hotel_ids            bigint[],
    -- the signing secret as given (`whsec_` + base64): the receiver holds it too
    secret               text        NOT NULL,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    consecutive_failures integer     NOT NULL DEFAULT 0,
    paused_at            timestamptz
);

-- One row per (subscription, event, type): made by the `webhooks` projection in the
-- transaction that moves its checkpoint, so every matching event gets its delivery
-- once, in commit order, whether or not the subscriber was answering then. Sent after,
-- by the webhook worker, in order per `ordering_key` (a reservation, or a hotel's room
-- type), with the same `delivery_id` on every attempt until `give_up_at`.
CREATE TABLE webhook_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id     text        NOT NULL UNIQUE,
    subscription_id text        NOT NULL
        REFERENCES webhook_subscriptions (subscription_id) ON DELETE CASCADE,
    event_type      text        NOT NULL,
    ordering_key    text        NOT NULL,
    -- the log position of the event it was made from: with the subscription and the
    -- type, what makes a delivery once if a batch is applied again
    position        bigint      NOT NULL,
    body            jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    state           text        NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    give_up_at      timestamptz NOT NULL,
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz,
    UNIQUE (subscription_id, position, event_type)
);
-- The sender's queue: the first pending delivery of each ordering key.
CREATE INDEX webhook_deliveries_in_order ON webhook_deliveries (subscription_id, ordering_key, id)
    WHERE state = 'pending';
CREATE INDEX webhook_deliveries_of ON webhook_deliveries (subscription_id, id);
CREATE INDEX webhook_deliveries_pending_age ON webhook_deliveries (created_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (id) WHERE state = 'failed';
-- Retention deletes the deliveries delivered more than RETENTION_DAYS ago.
CREATE INDEX webhook_deliveries_delivered ON webhook_deliveries (delivered_at) WHERE state = 'delivered';
