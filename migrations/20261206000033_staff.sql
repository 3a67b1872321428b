-- Staff accounts: the people who work the console, each with a role (admin, revenue,
-- front_desk, auditor) and a password hashed with Argon2id (a PHC string: algorithm,
-- parameters, salt and hash; never the password). One account per e-mail, in any case.
--
-- `failed_sign_ins` counts wrong passwords in a row; at the fifth the account is locked
-- until `locked_until` and the count starts again. `disabled_at`: an account that may no
-- longer sign in (kept, so the history's names still resolve).
CREATE TABLE staff (
    staff_id        uuid        PRIMARY KEY,
    email           text        NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    name            text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    role            text        NOT NULL
        CHECK (role IN ('admin', 'revenue', 'front_desk', 'auditor')),
    password_hash   text        NOT NULL,
    failed_sign_ins integer     NOT NULL DEFAULT 0 CHECK (failed_sign_ins >= 0),
    locked_until    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    disabled_at     timestamptz
);
CREATE UNIQUE INDEX staff_by_email ON staff (lower(email));
