//! Staff accounts: created from the command line or the application, one per e-mail,
//! passwords stored as Argon2id hashes, and a sign-in that locks an account for a
//! quarter of an hour after five wrong passwords in a row.

use app::staff::{self, StaffError, StaffRole, LOCK_OUT, MAX_FAILURES};
use chrono::Utc;
use reqwest::Method;
use serde_json::{json, Value};

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
        // The rule a guest's address meets: a domain with a dot inside it.
        ("rui@localhost", "Rui", PASSWORD, "email"),
        ("rui@hotel.", "Rui", PASSWORD, "email"),
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

// ---------------------------------------------------------------------------
// Sessions over HTTP: the console's way in.

/// A signed-in browser: its cookie and the session's CSRF token.
struct Browser {
    cookie: String,
    csrf: String,
}

async fn person(app: &TestApp, email: &str, name: &str, role: StaffRole) -> staff::Staff {
    staff::create(&app.db.pool, email, name, role, PASSWORD)
        .await
        .expect("created")
}

async fn sign_in(app: &TestApp, email: &str, password: &str) -> Reply {
    app.send(
        app.request(Method::POST, "/v1/sessions", None)
            .json(&json!({"email": email, "password": password})),
    )
    .await
}

async fn signed_in(app: &TestApp, email: &str) -> Browser {
    let reply = sign_in(app, email, PASSWORD).await;
    let body = reply.assert_status(201).clone();
    let set_cookie = reply
        .headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a cookie is set");
    let pair = set_cookie.split(';').next().expect("name=value");
    Browser {
        cookie: pair.to_owned(),
        csrf: body["csrf_token"].as_str().expect("csrf token").to_owned(),
    }
}

/// A request as that browser sends it: the cookie, and the CSRF header if `csrf`.
fn as_browser(
    app: &TestApp,
    browser: &Browser,
    method: Method,
    path: &str,
    csrf: Option<&str>,
) -> reqwest::RequestBuilder {
    let builder = app
        .request(method, path, None)
        .header("Cookie", &browser.cookie);
    match csrf {
        Some(token) => builder.header("X-CSRF-Token", token),
        None => builder,
    }
}

fn five_rooms() -> Value {
    json!({"start_date": day(10), "end_date": day(12), "total_rooms": 7})
}

#[tokio::test]
async fn a_sign_in_sets_a_strict_http_only_cookie_and_records_the_person_with_each_change() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let ana = person(&app, "ana@hotel.example", "Ana Lima", StaffRole::Revenue).await;

    let reply = sign_in(&app, "ANA@hotel.example", PASSWORD).await;

    let body = reply.assert_status(201);
    assert_eq!(body["staff"]["name"], "Ana Lima", "{body}");
    assert_eq!(body["staff"]["role"], "revenue", "{body}");
    let cookie = reply.headers["set-cookie"].to_str().expect("ascii");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(cookie.contains(attribute), "{attribute} missing: {cookie}");
    }
    // A loopback address is the one place the cookie goes without Secure.
    assert!(!cookie.contains("Secure"), "{cookie}");
    let browser = signed_in(&app, "ana@hotel.example").await;
    let me = app
        .send(as_browser(&app, &browser, Method::GET, "/v1/me", None))
        .await;
    let me = me.assert_status(200);
    assert_eq!(
        (&me["name"], &me["role"], &me["csrf_token"]),
        (&json!("Ana Lima"), &json!("revenue"), &json!(browser.csrf))
    );

    let changed = app
        .send(
            as_browser(
                &app,
                &browser,
                Method::PUT,
                &format!("/v1/hotels/{HOTEL}/room-types/{KING}/inventory"),
                Some(&browser.csrf),
            )
            .json(&five_rooms()),
        )
        .await;

    changed.assert_status(200);
    let metadata: Value =
        sqlx::query_scalar("SELECT metadata FROM events ORDER BY global_position DESC LIMIT 1")
            .fetch_one(&app.db.pool)
            .await
            .expect("the change's event");
    assert_eq!(metadata["client"], "Ana Lima", "{metadata}");
    assert_eq!(metadata["staff_id"], json!(ana.staff_id), "{metadata}");
    app.finish().await;
}

#[tokio::test]
async fn a_forged_write_without_the_sessions_csrf_token_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    person(&app, "ana@hotel.example", "Ana Lima", StaffRole::Admin).await;
    let browser = signed_in(&app, "ana@hotel.example").await;
    let other = {
        person(&app, "rui@hotel.example", "Rui Costa", StaffRole::Admin).await;
        signed_in(&app, "rui@hotel.example").await
    };
    let path = format!("/v1/hotels/{HOTEL}/room-types/{KING}/inventory");
    let before = app.snapshot().await;

    // No header (what a form on another site would send), another session's token,
    // and the right token from another origin.
    let forged = [
        as_browser(&app, &browser, Method::PUT, &path, None),
        as_browser(&app, &browser, Method::PUT, &path, Some(&other.csrf)),
        as_browser(&app, &browser, Method::PUT, &path, Some(&browser.csrf))
            .header("Origin", "https://evil.example"),
    ];
    for request in forged {
        let reply = app.send(request.json(&five_rooms())).await;
        reply.assert_error(403, "csrf_failed");
    }

    assert_eq!(
        app.snapshot().await,
        before,
        "a refused write changes nothing"
    );
    // Reads need no CSRF token, and the right one from this origin writes.
    app.send(as_browser(&app, &browser, Method::GET, "/v1/me", None))
        .await
        .assert_status(200);
    let origin = app.address.clone();
    app.send(
        as_browser(&app, &browser, Method::PUT, &path, Some(&browser.csrf))
            .header("Origin", origin)
            .json(&five_rooms()),
    )
    .await
    .assert_status(200);
    app.finish().await;
}

#[tokio::test]
async fn a_signed_out_expired_idle_or_disabled_session_is_refused() {
    let app = spawn_app().await;
    for (email, name) in [
        ("a@hotel.example", "Signs Out"),
        ("b@hotel.example", "Stays Idle"),
        ("c@hotel.example", "Is Disabled"),
    ] {
        person(&app, email, name, StaffRole::FrontDesk).await;
    }
    let me = |browser: &Browser| as_browser(&app, browser, Method::GET, "/v1/me", None);

    // Sign-out revokes the session and clears the cookie.
    let leaving = signed_in(&app, "a@hotel.example").await;
    let current =
        |browser: &Browser| as_browser(&app, browser, Method::GET, "/v1/sessions/current", None);
    let live = app.send(current(&leaving)).await;
    assert_eq!(live.assert_status(200)["csrf_token"], json!(leaving.csrf));
    let out = app
        .send(as_browser(
            &app,
            &leaving,
            Method::DELETE,
            "/v1/sessions/current",
            Some(&leaving.csrf),
        ))
        .await;
    out.assert_status(204);
    assert!(
        out.headers["set-cookie"]
            .to_str()
            .expect("ascii")
            .contains("Max-Age=0"),
        "{:?}",
        out.headers
    );
    app.send(me(&leaving))
        .await
        .assert_error(401, "unauthorized");
    // A page asking whether it is signed in is told no, not refused.
    assert_eq!(app.send(current(&leaving)).await.status.as_u16(), 204);

    // An account disabled by an admin: its live session ends at once.
    let disabled = signed_in(&app, "c@hotel.example").await;
    app.send(me(&disabled)).await.assert_status(200);
    let id: uuid::Uuid =
        sqlx::query_scalar("SELECT staff_id FROM staff WHERE name = 'Is Disabled'")
            .fetch_one(&app.db.pool)
            .await
            .expect("id");
    app.send(app.request(Method::DELETE, &format!("/v1/staff/{id}"), Some(ADMIN)))
        .await
        .assert_status(204);
    app.send(me(&disabled))
        .await
        .assert_error(401, "unauthorized");
    sign_in(&app, "c@hotel.example", PASSWORD)
        .await
        .assert_error(401, "wrong_credentials");

    // Two idle hours end a session; a used one lasts to its twelfth hour.
    let idle = signed_in(&app, "b@hotel.example").await;
    app.clock.advance(chrono::Duration::minutes(119));
    app.send(me(&idle)).await.assert_status(200);
    app.clock.advance(chrono::Duration::minutes(121));
    app.send(me(&idle)).await.assert_error(401, "unauthorized");
    let working = signed_in(&app, "b@hotel.example").await;
    for _ in 0..11 {
        app.clock.advance(chrono::Duration::minutes(60));
        app.send(me(&working)).await.assert_status(200);
    }
    app.clock.advance(chrono::Duration::minutes(61));
    app.send(me(&working))
        .await
        .assert_error(401, "unauthorized");
    app.finish().await;
}

#[tokio::test]
async fn wrong_passwords_over_http_are_401_then_423_with_the_end_of_the_lock() {
    let app = spawn_app().await;
    person(&app, "rui@hotel.example", "Rui Costa", StaffRole::FrontDesk).await;

    for _ in 1..MAX_FAILURES {
        sign_in(&app, "rui@hotel.example", "not the password")
            .await
            .assert_error(401, "wrong_credentials");
    }
    let locked = sign_in(&app, "rui@hotel.example", "not the password").await;
    let body = locked.assert_error(423, "account_locked").clone();
    sign_in(&app, "rui@hotel.example", PASSWORD)
        .await
        .assert_error(423, "account_locked");
    sign_in(&app, "nobody@hotel.example", PASSWORD)
        .await
        .assert_error(401, "wrong_credentials");

    assert!(body["locked_until"].is_string(), "{body}");
    let listed = app.get("/v1/staff", Some(ADMIN)).await;
    assert_eq!(
        listed.assert_status(200)["staff"][0]["locked_until"],
        body["locked_until"]
    );
    app.clock.advance(LOCK_OUT + chrono::Duration::seconds(1));
    sign_in(&app, "rui@hotel.example", PASSWORD)
        .await
        .assert_status(201);
    app.finish().await;
}

#[tokio::test]
async fn roles_decide_what_each_staff_member_may_do() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);
    for (email, role) in [
        ("revenue@hotel.example", StaffRole::Revenue),
        ("desk@hotel.example", StaffRole::FrontDesk),
        ("audit@hotel.example", StaffRole::Auditor),
    ] {
        person(&app, email, email, role).await;
    }
    let revenue = signed_in(&app, "revenue@hotel.example").await;
    let desk = signed_in(&app, "desk@hotel.example").await;
    let audit = signed_in(&app, "audit@hotel.example").await;
    let inventory = format!("/v1/hotels/{HOTEL}/room-types/{KING}/inventory");
    let check_in = format!("/v1/reservations/{id}/check-in");
    let calendar = format!(
        "/v1/hotels/{HOTEL}/calendar?start_date={}&end_date={}",
        day(10),
        day(12)
    );
    let staff_account = json!({"email": "x@hotel.example", "name": "X", "role": "admin",
                               "password": PASSWORD});

    let status = |reply: Reply| reply.status.as_u16();
    let write = |browser: &Browser, method: Method, path: &str| {
        as_browser(&app, browser, method, path, Some(&browser.csrf))
            .header("Idempotency-Key", format!("k-{path}-{}", browser.csrf))
    };
    // Revenue sets inventory, may not check guests in or create accounts.
    assert_eq!(
        status(
            app.send(write(&revenue, Method::PUT, &inventory).json(&five_rooms()))
                .await
        ),
        200
    );
    assert_eq!(
        status(app.send(write(&revenue, Method::POST, &check_in)).await),
        403
    );
    assert_eq!(
        status(
            app.send(write(&revenue, Method::POST, "/v1/staff").json(&staff_account))
                .await
        ),
        403
    );
    // The front desk works the stay (too early today: 409, not 403) and reads guests;
    // it may not touch inventory.
    assert_eq!(
        status(
            app.send(write(&desk, Method::PUT, &inventory).json(&five_rooms()))
                .await
        ),
        403
    );
    assert_eq!(
        status(app.send(write(&desk, Method::POST, &check_in)).await),
        409
    );
    let seen = app
        .send(as_browser(
            &app,
            &desk,
            Method::GET,
            &format!("/v1/reservations/{id}"),
            None,
        ))
        .await;
    assert_eq!(seen.assert_status(200)["guest"]["name"], "Ana Lima");
    // The auditor reads, and changes nothing.
    for browser in [&revenue, &desk, &audit] {
        assert_eq!(
            status(
                app.send(as_browser(&app, browser, Method::GET, &calendar, None))
                    .await
            ),
            200
        );
    }
    assert_eq!(
        status(
            app.send(write(&audit, Method::PUT, &inventory).json(&five_rooms()))
                .await
        ),
        403
    );
    assert_eq!(
        status(app.send(write(&audit, Method::POST, &check_in)).await),
        403
    );
    let hidden = app
        .send(as_browser(
            &app,
            &revenue,
            Method::GET,
            &format!("/v1/reservations/{id}"),
            None,
        ))
        .await;
    assert!(
        !hidden.text.contains("Ana Lima"),
        "revenue reads no guest's name: {}",
        hidden.text
    );
    app.finish().await;
}

#[tokio::test]
async fn admins_create_and_list_staff_through_the_api() {
    let app = spawn_app().await;
    let body = json!({"email": "eva@hotel.example", "name": "Eva Rocha", "role": "front_desk",
                      "password": PASSWORD});

    let created = app
        .send(
            app.request(Method::POST, "/v1/staff", Some(ADMIN))
                .json(&body),
        )
        .await;

    let created = created.assert_status(201).clone();
    assert_eq!(created["role"], "front_desk", "{created}");
    assert!(created.get("password").is_none() && created.get("password_hash").is_none());
    app.send(
        app.request(Method::POST, "/v1/staff", Some(ADMIN))
            .json(&body),
    )
    .await
    .assert_error(409, "email_taken");
    let mut bad_role = body.clone();
    bad_role["role"] = json!("owner");
    bad_role["email"] = json!("owner@hotel.example");
    let refused = app
        .send(
            app.request(Method::POST, "/v1/staff", Some(ADMIN))
                .json(&bad_role),
        )
        .await;
    assert_eq!(
        refused.assert_error(422, "invalid_request")["field"],
        "role"
    );
    app.send(
        app.request(Method::POST, "/v1/staff", Some(AUDITOR))
            .json(&body),
    )
    .await
    .assert_error(403, "forbidden");
    let listed = app.get("/v1/staff", Some(ADMIN)).await;
    let listed = listed.assert_status(200);
    assert_eq!(
        listed["staff"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["staff"][0]["name"], "Eva Rocha");
    assert!(listed["staff"][0]["disabled_at"].is_null());
    sign_in(&app, "eva@hotel.example", PASSWORD)
        .await
        .assert_status(201);
    app.finish().await;
}

#[tokio::test]
async fn guesses_sent_all_at_once_get_no_more_tries_than_guesses_sent_one_by_one() {
    let db = TestDb::new().await;
    staff::create(
        &db.pool,
        "ivo@hotel.example",
        "Ivo Reis",
        StaffRole::Admin,
        PASSWORD,
    )
    .await
    .expect("created");
    let now = Utc::now();

    let guesses = (0..24).map(|i| {
        let pool = db.pool.clone();
        async move {
            staff::sign_in(
                &pool,
                "ivo@hotel.example",
                &format!("guess number {i}"),
                now,
            )
            .await
        }
    });
    let outcomes = futures::future::join_all(guesses).await;

    let wrong = outcomes
        .iter()
        .filter(|o| matches!(o, Err(StaffError::WrongCredentials)))
        .count();
    let locked = outcomes
        .iter()
        .filter(|o| matches!(o, Err(StaffError::LockedOut { .. })))
        .count();
    assert_eq!(
        (wrong, locked),
        (MAX_FAILURES as usize - 1, 24 - (MAX_FAILURES as usize - 1)),
        "{outcomes:?}"
    );
    let right = staff::sign_in(&db.pool, "ivo@hotel.example", PASSWORD, now).await;
    assert!(
        matches!(right, Err(StaffError::LockedOut { .. })),
        "{right:?}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn a_new_sign_in_ends_the_browsers_old_session_and_an_admin_cannot_disable_themselves() {
    let app = spawn_app().await;
    let ana = person(&app, "ana@hotel.example", "Ana Lima", StaffRole::Admin).await;
    let first = signed_in(&app, "ana@hotel.example").await;

    let again = app
        .send(
            app.request(Method::POST, "/v1/sessions", None)
                .header("Cookie", &first.cookie)
                .json(&json!({"email": "ana@hotel.example", "password": PASSWORD})),
        )
        .await;

    again.assert_status(201);
    assert_eq!(again.headers["cache-control"], "no-store");
    app.send(as_browser(&app, &first, Method::GET, "/v1/me", None))
        .await
        .assert_error(401, "unauthorized");
    let second = signed_in(&app, "ana@hotel.example").await;
    let own = format!("/v1/staff/{}", ana.staff_id);
    app.send(as_browser(
        &app,
        &second,
        Method::DELETE,
        &own,
        Some(&second.csrf),
    ))
    .await
    .assert_error(409, "own_account");
    app.finish().await;
}

#[tokio::test]
async fn only_roles_that_see_guests_search_by_a_guests_email() {
    let app = spawn_app().await;
    person(&app, "mia@hotel.example", "Mia Sousa", StaffRole::Revenue).await;
    let revenue = signed_in(&app, "mia@hotel.example").await;
    let path = "/v1/reservations?guest_email=ana@example.com";

    for reply in [
        app.get(path, Some(AUDITOR)).await,
        app.send(as_browser(&app, &revenue, Method::GET, path, None))
            .await,
    ] {
        reply.assert_error(403, "forbidden");
    }
    app.get(path, Some(ADMIN)).await.assert_status(200);
    app.finish().await;
}

#[tokio::test]
async fn ended_sessions_are_deleted_after_the_retention_and_live_ones_are_kept() {
    let app = spawn_app().await;
    person(&app, "ana@hotel.example", "Ana Lima", StaffRole::Admin).await;
    let leaving = signed_in(&app, "ana@hotel.example").await;
    app.send(as_browser(
        &app,
        &leaving,
        Method::DELETE,
        "/v1/sessions/current",
        Some(&leaving.csrf),
    ))
    .await
    .assert_status(204);
    signed_in(&app, "ana@hotel.example").await; // ends by expiring

    let retained = app.retention_after(31).await;

    assert_eq!(retained.staff_sessions, 2, "{retained:?}");
    let live = signed_in(&app, "ana@hotel.example").await;
    assert_eq!(app.retention_after(0).await.staff_sessions, 0);
    app.send(as_browser(&app, &live, Method::GET, "/v1/me", None))
        .await
        .assert_status(200);
    app.finish().await;
}

#[tokio::test]
async fn behind_a_tls_proxy_the_cookie_is_secure_even_on_a_loopback_host() {
    let app = spawn_app_with(|settings| settings.session_cookie_secure = "always".into()).await;
    person(&app, "ana@hotel.example", "Ana Lima", StaffRole::Admin).await;

    let reply = sign_in(&app, "ana@hotel.example", PASSWORD).await;

    reply.assert_status(201);
    let cookie = reply.headers["set-cookie"].to_str().expect("ascii");
    assert!(cookie.contains("; Secure"), "{cookie}");
    app.finish().await;
}
