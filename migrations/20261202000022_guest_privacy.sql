-- Guests' personal data sealed under a key per guest (docs/privacy.md).
--
-- The keys live in a schema of their own, apart from the log and the read models, so
-- that a deployment can grant, back up and expire them on their own terms (a key store
-- outside PostgreSQL replaces these tables behind the server's KeyStore trait). Erasing
-- a guest destroys their keys: every copy of what was sealed under them (the events,
-- the rows below, the relay's stream, backups of any of these) can no longer be read,
-- and nothing in the log is rewritten, so the audit chain, computed over the stored
-- bytes, still verifies.
CREATE SCHEMA privacy;

-- Deployment secrets: `guest_id_secret`, the HMAC key guest ids are derived with from
-- the normalized e-mail (made by the first server that needs it).
CREATE TABLE privacy.settings (
    name  text  PRIMARY KEY,
    value bytea NOT NULL
);

-- One row per key. `key` is NULL once destroyed (the row stays: a value sealed under a
-- destroyed key reads as erased, not as unknown). A guest has at most one live key; one
-- who books again after an erasure gets a new one.
CREATE TABLE privacy.guest_keys (
    key_id       uuid        PRIMARY KEY,
    guest_id     text        NOT NULL,
    key          bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    destroyed_at timestamptz,
    CHECK ((key IS NULL) = (destroyed_at IS NOT NULL))
);
CREATE UNIQUE INDEX guest_keys_live ON privacy.guest_keys (guest_id) WHERE key IS NOT NULL;
CREATE INDEX guest_keys_by_guest ON privacy.guest_keys (guest_id);

-- The reservation's row keeps its guest as the event does: `guest`, the sealed value
-- (or "erased"). Rows written before sealing keep guest_name and guest_email in the
-- clear (and `guest` NULL) until their guest is erased, which clears both.
ALTER TABLE reservations
    ADD COLUMN guest jsonb,
    ALTER COLUMN guest_name DROP NOT NULL,
    ALTER COLUMN guest_email DROP NOT NULL,
    ADD CONSTRAINT reservations_guest_stored
        CHECK (guest IS NOT NULL OR (guest_name IS NOT NULL AND guest_email IS NOT NULL));
-- An erasure finds a guest's reservations: sealed ones by the guest id in their sealed
-- value, the older ones by e-mail (only they carry it, so only they are indexed).
CREATE INDEX reservations_by_guest ON reservations ((guest -> 'sealed' ->> 'guest'))
    WHERE guest ? 'sealed';
CREATE INDEX reservations_by_clear_email ON reservations (guest_email)
    WHERE guest_email IS NOT NULL;

-- The view keeps the sealed value too, and the guest id beside it for the look-up by
-- guest (an admin's query by e-mail is turned into the id). Rows of events written
-- before sealing keep the e-mail in the clear until their guest is erased.
ALTER TABLE reservations_view
    ADD COLUMN guest jsonb,
    ADD COLUMN guest_id text,
    ALTER COLUMN guest_name DROP NOT NULL,
    ALTER COLUMN guest_email DROP NOT NULL;
CREATE INDEX reservations_view_by_guest_id
    ON reservations_view (generation, guest_id) WHERE guest_id IS NOT NULL;
