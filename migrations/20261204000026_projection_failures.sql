-- Why a projection runner is failing, for every server to show: a runner that cannot
-- do its work (a relay whose JetStream stream cannot be created, a Redis that refuses
-- writes) retries for ever, and its log line alone is on one machine. The leader that
-- failed writes the whole error chain here; it is cleared when a leadership term gets
-- past its storage check again. `failing_since` is when the current run of failures
-- began.
ALTER TABLE projection_checkpoints
    ADD COLUMN last_error text,
    ADD COLUMN failing_since timestamptz;
