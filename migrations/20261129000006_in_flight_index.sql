-- The expiry sweeper looks every second for requests left in flight (their process died)
-- to mark them abandoned. Without an index that is a scan of every idempotency record
-- of the last 24 hours; in-flight records are few (payments waiting on the gateway), so
-- a partial index keeps the look-up as small as they are.
CREATE INDEX idempotency_keys_in_flight ON idempotency_keys (created_at)
    WHERE state = 'in_flight';
