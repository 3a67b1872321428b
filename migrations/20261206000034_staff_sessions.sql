-- Staff sessions: one row per sign-in. The browser holds a random token in an HttpOnly,
-- SameSite=Strict cookie; only its SHA-256 is stored here, so a copy of this table
-- signs no one in. `csrf_token` is the session's second secret: the console sends it
-- in a header with every write, which a page on another site cannot read or forge.
--
-- A session ends at `expires_at` (a shift's length after sign-in), after `idle` without
-- a request (checked against `last_seen_at`), at sign-out (`revoked_at`), and when its
-- account is disabled.
CREATE TABLE staff_sessions (
    token_hash   bytea       PRIMARY KEY CHECK (length(token_hash) = 32),
    staff_id     uuid        NOT NULL REFERENCES staff (staff_id),
    csrf_token   text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    revoked_at   timestamptz
);
-- Revoking a person's sessions (an account disabled) finds them by person.
CREATE INDEX staff_sessions_by_staff ON staff_sessions (staff_id) WHERE revoked_at IS NULL;
