-- Retention (src/sweeper.rs, retention_once) deletes, a batch a minute, payment webhook
-- receipts, delivered outbox rows and finished sagas older than RETENTION_DAYS, and
-- idempotency records older than a day (by idempotency_keys_by_age). These let each
-- batch find its rows without reading the whole table; the partial ones index only the
-- rows retention may delete, so the hot writes (a new outbox row, a saga in progress)
-- do not maintain them.
CREATE INDEX payment_webhooks_by_age ON payment_webhooks (received_at);
CREATE INDEX payment_outbox_delivered ON payment_outbox (done_at) WHERE done_at IS NOT NULL;
CREATE INDEX payment_sagas_finished ON payment_sagas (updated_at) WHERE state <> 'authorizing';
