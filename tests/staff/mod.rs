//! Staff accounts: created from the command line or the application, one per e-mail,
//! passwords stored as Argon2id hashes, and a sign-in that locks an account for a
//! quarter of an hour after five wrong passwords in a row.

use app::staff::{self, StaffError, StaffRole, LOCK_OUT, MAX_FAILURES};
use chrono::Utc;

use crate::support::*;

const PASSWORD: &str = "a long enough secret";

#[tokio::test]
async fn a_staff_member_is_created_once_per_email_with_a_hashed_password() {
    let db = TestDb::new().await;

    let ana = staff::create(
        &db.pool,
        "ana@hotel.example",
        "Ana Lima",
        StaffRole::Revenue,
        PASSWORD,
    )
    .await
    .expect("created");

    assert_eq!(
        (ana.name.as_str(), ana.role),
        ("Ana Lima", StaffRole::Revenue)
    );
    let hash: String = sqlx::query_scalar("SELECT password_hash FROM staff WHERE staff_id = $1")
        .bind(ana.staff_id)
        .fetch_one(&db.pool)
        .await
        .expect("row");
    assert!(
        hash.starts_with("$argon2id$") && !hash.contains(PASSWORD),
        "{hash}"
    );
    let again = staff::create(
        &db.pool,
        "ANA@hotel.example",
        "Ana",
        StaffRole::Admin,
        PASSWORD,
    )
    .await;
    assert!(matches!(again, Err(StaffError::EmailTaken)), "{again:?}");
    for (email, name, password, field) in [
        ("not-an-email", "Rui", PASSWORD, "email"),
        ("rui@hotel.example", " ", PASSWORD, "name"),
        ("rui@hotel.example", "Rui", "short", "password"),
    ] {
        let refused = staff::create(&db.pool, email, name, StaffRole::FrontDesk, password).await;
        assert!(
            matches!(&refused, Err(StaffError::Invalid { field: f, .. }) if *f == field),
            "{refused:?}"
        );
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM staff")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(count, 1, "refusals create nothing");
    db.drop_database().await;
}

#[tokio::test]
async fn five_wrong_passwords_lock_an_account_for_a_quarter_of_an_hour() {
    let db = TestDb::new().await;
    staff::create(
        &db.pool,
        "rui@hotel.example",
        "Rui Costa",
        StaffRole::FrontDesk,
        PASSWORD,
    )
    .await
    .expect("created");
    let now = Utc::now();

    let signed_in = staff::sign_in(&db.pool, "Rui@Hotel.example", PASSWORD, now)
        .await
        .expect("the right password, in any case of the e-mail");
    assert_eq!(signed_in.role, StaffRole::FrontDesk);
    let unknown = staff::sign_in(&db.pool, "nobody@hotel.example", PASSWORD, now).await;
    assert!(
        matches!(unknown, Err(StaffError::WrongCredentials)),
        "{unknown:?}"
    );
    for attempt in 1..=MAX_FAILURES {
        let wrong = staff::sign_in(&db.pool, "rui@hotel.example", "not the password", now).await;
        if attempt < MAX_FAILURES {
            assert!(
                matches!(wrong, Err(StaffError::WrongCredentials)),
                "{wrong:?}"
            );
        } else {
            assert!(
                matches!(wrong, Err(StaffError::LockedOut { .. })),
                "{wrong:?}"
            );
        }
    }

    // Locked: even the right password is refused, until the lock-out has passed.
    let locked = staff::sign_in(&db.pool, "rui@hotel.example", PASSWORD, now).await;
    assert!(
        matches!(locked, Err(StaffError::LockedOut { .. })),
        "{locked:?}"
    );
    let later = now + LOCK_OUT + chrono::Duration::seconds(1);
    staff::sign_in(&db.pool, "rui@hotel.example", PASSWORD, later)
        .await
        .expect("unlocked after the lock-out");
    db.drop_database().await;
}

#[tokio::test]
async fn staff_are_created_from_the_command_line_with_the_password_from_the_environment() {
    let db = TestDb::new().await;
    let create = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_reservations"))
            .args([
                "staff",
                "create",
                "--email",
                "eva@hotel.example",
                "--name",
                "Eva Sousa",
            ])
            .args(["--role", "auditor"])
            .env("DATABASE_URL", &db.url)
            .env("STAFF_PASSWORD", PASSWORD)
            .env("RUST_LOG", "warn")
            .output()
            .expect("the binary runs")
    };

    let first = create();

    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("Eva Sousa <eva@hotel.example>, auditor")
    );
    staff::sign_in(&db.pool, "eva@hotel.example", PASSWORD, Utc::now())
        .await
        .expect("signs in with the password given");
    let second = create();
    assert!(!second.status.success(), "the same e-mail twice");
    db.drop_database().await;
}
