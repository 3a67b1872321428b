//! The guest's e-mails, sent to a real SMTP server on loopback (aiosmtpd): one
//! confirmation however many duplicate confirms race, none for a declined card, every
//! message once after the mail server was away, once after a server killed between the
//! commit and the send, none to an erased guest, and what a reservation's messages say
//! over HTTP.

use std::sync::Arc;

use app::mail::smtp::SmtpMailer;
use app::mail::{send_due, MailConfig, Sent};
use serde_json::json;
use store::privacy::Privacy;

use crate::support::*;

const GUEST_EMAIL: &str = "ana@example.com";

fn mail_config() -> MailConfig {
    MailConfig {
        max_attempts: 5,
        first_backoff: std::time::Duration::from_secs(1),
        max_backoff: std::time::Duration::from_secs(4),
        ..MailConfig::default()
    }
}

/// One pass of the mail worker at the test clock's time, through `sink`.
async fn send_mail(app: &TestApp, sink: &SmtpSink) -> Sent {
    let mailer = SmtpMailer::new(&sink.url(), "Hotel Tejo <stay@tejo.example>").expect("mailer");
    send_due(
        &app.db.pool,
        &Privacy::postgres(app.db.pool.clone()),
        &mailer,
        &mail_config(),
        app.now(),
        100,
    )
    .await
    .expect("mail pass")
}

async fn messages(app: &TestApp, token: &str, id: &str) -> Reply {
    app.get(&format!("/v1/reservations/{id}/messages"), Some(token))
        .await
}

/// The (kind, state) of each of a reservation's messages, in order.
async fn message_states(app: &TestApp, id: &str) -> Vec<(String, String)> {
    let reply = messages(app, ADMIN, id).await;
    reply.assert_status(200)["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap_or_default().to_owned(),
                m["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A hotel with `rooms` king rooms on nights 10..15 and one hold of 10..13.
async fn held(app: &TestApp, rooms: i64) -> String {
    app.seed_hotel(day(10), 5, rooms).await;
    app.hold_ok(WEB, "hold", &hold_body(day(10), day(13), 1))
        .await
}

#[tokio::test]
async fn twenty_duplicate_confirms_send_one_confirmation_after_the_payment() {
    // Arrange
    let sink = SmtpSink::start().await;
    let app = Arc::new(spawn_app().await);
    let id = held(&app, 2).await;

    // Act: twenty confirms at once, under twenty keys, then the worker, three times.
    let mut tasks = Vec::new();
    for n in 0..20 {
        let app = app.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            app.confirm(WEB, &format!("pay-{n}"), &id, "tok_ok").await
        }));
    }
    for task in tasks {
        let status = task.await.expect("task").status.as_u16();
        assert!([200, 409].contains(&status), "{status}");
    }
    let mut sent = 0;
    for _ in 0..3 {
        sent += send_mail(&app, &sink).await.sent;
    }

    // Assert: one message, to the guest, about this stay, in the hotel's language.
    assert_eq!(sent, 1);
    let received = sink.received();
    assert_eq!(received.len(), 1, "{received:?}");
    let mail = &received[0];
    assert!(
        mail.header("To").unwrap_or_default().contains(GUEST_EMAIL),
        "{}",
        mail.raw
    );
    let subject = mail.header("Subject").unwrap_or_default();
    assert!(!subject.is_empty(), "{}", mail.raw);
    let reservation = app.get_reservation(WEB, &id).await;
    let reference = reservation.json["reference"].as_str().unwrap_or_default();
    assert_eq!(reference.len(), 8, "{}", reservation.json);
    assert!(
        mail.raw.contains(reference),
        "the short reference is in the message: {}",
        mail.raw
    );
    assert!(
        mail.header("Message-ID")
            .unwrap_or_default()
            .contains(&format!("{id}.confirmation.")),
        "{}",
        mail.raw
    );
    assert!(mail.raw.contains("text/html"), "an HTML part: {}", mail.raw);
    let listed = messages(&app, WEB, &id).await;
    let listed = listed.assert_status(200);
    assert_eq!(listed["messages"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["messages"][0]["kind"], "confirmation");
    assert_eq!(listed["messages"][0]["state"], "sent");
    assert_eq!(listed["messages"][0]["to"], GUEST_EMAIL);
    assert!(listed["messages"][0]["sent_at"].is_string());
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_outbox")
        .fetch_one(&app.db.pool)
        .await
        .expect("count");
    assert_eq!(queued, 1);
    Arc::into_inner(app).expect("one owner").finish().await;
}

#[tokio::test]
async fn a_declined_card_sends_no_confirmation() {
    // Arrange
    let sink = SmtpSink::start().await;
    let app = spawn_app().await;
    let id = held(&app, 2).await;

    // Act
    app.confirm(WEB, "pay", &id, "tok_decline")
        .await
        .assert_error(402, "payment_declined");
    send_mail(&app, &sink).await;

    // Assert
    assert!(sink.received().is_empty());
    assert_eq!(message_states(&app, &id).await, Vec::new());
    app.finish().await;
}

#[tokio::test]
async fn a_holds_date_changes_are_not_news_and_its_confirmation_carries_the_last_dates() {
    // Arrange: a hold of 10..13, moved twice before it is paid for.
    let sink = SmtpSink::start().await;
    let app = spawn_app().await;
    let id = held(&app, 2).await;

    // Act
    for (n, (from, to)) in [(11, 14), (12, 15)].into_iter().enumerate() {
        app.change_dates(
            WEB,
            &format!("move-{n}"),
            &id,
            &serde_json::json!({"start_date": day(from), "end_date": day(to)}),
        )
        .await
        .assert_status(200);
    }
    let while_held = message_states(&app, &id).await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);
    app.change_dates(
        WEB,
        "move-confirmed",
        &id,
        &serde_json::json!({"start_date": day(11), "end_date": day(14)}),
    )
    .await
    .assert_status(200);
    // One message of a reservation a pass, in order.
    send_mail(&app, &sink).await;
    send_mail(&app, &sink).await;

    // Assert: nothing queued while held; then the confirmation, with the dates it was
    // confirmed for, and one change of the confirmed stay.
    assert_eq!(while_held, Vec::new());
    let kinds: Vec<String> = message_states(&app, &id)
        .await
        .into_iter()
        .map(|(kind, _)| kind)
        .collect();
    assert_eq!(kinds, vec!["confirmation", "dates_changed"]);
    let received = sink.received();
    assert_eq!(received.len(), 2, "{received:?}");
    assert!(
        received[0].raw.contains(&day(12).to_string()),
        "{}",
        received[0].raw
    );
    app.finish().await;
}

#[tokio::test]
async fn messages_wait_for_a_mail_server_that_is_away_and_go_out_once_in_order() {
    // Arrange: the mail server is down while the guest confirms, then cancels.
    let mut sink = SmtpSink::start().await;
    sink.stop();
    let app = spawn_app().await;
    let id = held(&app, 2).await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);
    app.cancel(WEB, "cancel", &id, &json!({"reason": "plans changed"}))
        .await
        .assert_status(200);

    // Act: passes while it is away, then it comes back.
    let away = send_mail(&app, &sink).await;
    let listed = messages(&app, ADMIN, &id).await;
    let while_away = listed.assert_status(200)["messages"].clone();
    app.clock.advance(chrono::Duration::seconds(1));
    let still_away = send_mail(&app, &sink).await;
    sink.resume().await;
    let too_soon = send_mail(&app, &sink).await;
    app.clock.advance(chrono::Duration::seconds(10));
    let mut back = Sent::default();
    for _ in 0..4 {
        let pass = send_mail(&app, &sink).await;
        back.sent += pass.sent;
        app.clock.advance(chrono::Duration::seconds(10));
    }

    // Assert
    assert_eq!(
        (away.sent, away.retrying),
        (0, 1),
        "the cancellation waits behind the confirmation"
    );
    assert_eq!(while_away[0]["state"], "pending");
    assert_eq!(while_away[0]["attempts"], 1);
    assert!(while_away[0]["last_error"].is_string(), "{while_away}");
    assert_eq!(still_away.retrying, 1);
    assert_eq!(too_soon, Sent::default(), "the retry waits for its backoff");
    assert_eq!(back.sent, 2);
    let received = sink.received();
    assert_eq!(received.len(), 2, "each once: {received:?}");
    let ids: Vec<String> = received
        .iter()
        .map(|m| m.header("Message-ID").unwrap_or_default())
        .collect();
    assert!(ids[0].contains(".confirmation."), "{ids:?}");
    assert!(ids[1].contains(".cancellation."), "{ids:?}");
    assert_eq!(
        message_states(&app, &id).await,
        vec![
            ("confirmation".to_owned(), "sent".to_owned()),
            ("cancellation".to_owned(), "sent".to_owned())
        ]
    );
    app.finish().await;
}

#[tokio::test]
async fn a_server_killed_between_the_commit_and_the_send_sends_once_after_its_restart() {
    // Arrange: a server whose mail worker would not look again for a minute.
    let sink = SmtpSink::start().await;
    let db = TestDb::new().await;
    let env = |poll_ms: &str| {
        vec![
            ("SMTP_URL", sink.url()),
            ("MAIL_FROM", "Hotel Tejo <stay@tejo.example>".to_owned()),
            ("MAIL_POLL_MS", poll_ms.to_owned()),
            ("SIM_GATEWAY_LATENCY_MS", "0".to_owned()),
            ("RUN_PROJECTIONS", "false".to_owned()),
        ]
    };
    let mut first = ServerProcess::start(&db, &env("60000")).await;
    first.seed_hotel(day(10), 5, 2).await;

    // Act: confirmed (committed, message queued), then killed before its worker looks.
    let id = first
        .hold_and_confirm(&hold_body(day(10), day(13), 1))
        .await;
    first.kill();
    let before_restart = sink.received().len();
    let second = ServerProcess::start(&db, &env("50")).await;
    let received = sink.wait_for(1).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;

    // Assert
    assert_eq!(before_restart, 0, "the first server sent nothing");
    assert_eq!(received.len(), 1);
    assert_eq!(sink.received().len(), 1, "sent once");
    let state: String =
        sqlx::query_scalar("SELECT state FROM mail_outbox WHERE reservation_id = $1::uuid")
            .bind(&id)
            .fetch_one(&db.pool)
            .await
            .expect("the row");
    assert_eq!(state, "sent");
    drop(second);
    db.drop_database().await;
}

#[tokio::test]
async fn an_erased_guest_is_sent_nothing_more_and_a_refused_address_fails_without_naming_it() {
    // Arrange: two confirmed stays, one for a guest the server refuses.
    let sink = SmtpSink::start().await;
    let app = spawn_app().await;
    let kept = held(&app, 3).await;
    app.confirm(WEB, "pay", &kept, "tok_ok")
        .await
        .assert_status(200);
    let mut refused_body = hold_body(day(10), day(13), 1);
    refused_body["guest"] = json!({"name": "Rui Nogueira", "email": "rui@refused.test"});
    let refused = app.hold_ok(WEB, "hold-2", &refused_body).await;
    app.confirm(WEB, "pay-2", &refused, "tok_ok")
        .await
        .assert_status(200);

    // Act: Ana is erased before the worker runs.
    app.post_json(
        "/v1/guests/erase",
        ADMIN,
        "erase",
        &json!({"email": GUEST_EMAIL}),
    )
    .await
    .assert_status(200);
    let pass = send_mail(&app, &sink).await;

    // Assert
    assert_eq!(
        (pass.sent, pass.dropped, pass.failed),
        (0, 1, 1),
        "{pass:?}"
    );
    assert!(sink.received().is_empty());
    let kept_listed = messages(&app, ADMIN, &kept).await;
    let kept_listed = kept_listed.assert_status(200);
    assert_eq!(kept_listed["messages"][0]["state"], "dropped");
    assert_eq!(kept_listed["messages"][0]["to"], "[erased]");
    let refused_listed = messages(&app, ADMIN, &refused).await;
    let refused_listed = refused_listed.assert_status(200);
    assert_eq!(refused_listed["messages"][0]["state"], "failed");
    let error = refused_listed["messages"][0]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("550"), "{error}");
    assert!(
        !error.contains("rui@refused.test"),
        "the stored error names no one: {error}"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_reservations_messages_are_its_channels_and_the_staffs_to_read() {
    // Arrange
    let app = spawn_app().await;
    let id = held(&app, 2).await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);

    // Act
    let owner = messages(&app, WEB, &id).await;
    let other = messages(&app, MOBILE, &id).await;
    let auditor = messages(&app, AUDITOR, &id).await;
    let unknown = messages(&app, ADMIN, &uuid::Uuid::new_v4().to_string()).await;
    let malformed = messages(&app, ADMIN, "not-a-uuid").await;

    // Assert: without SMTP_URL the message is queued, pending.
    assert_eq!(owner.assert_status(200)["messages"][0]["state"], "pending");
    other.assert_error(403, "forbidden");
    auditor.assert_error(403, "forbidden");
    unknown.assert_error(404, "not_found");
    malformed.assert_error(404, "not_found");
    app.finish().await;
}

#[tokio::test]
async fn retention_deletes_messages_sent_long_ago_and_keeps_those_still_owed() {
    // Arrange: one stay's confirmation sent, another's still pending (server away).
    let mut sink = SmtpSink::start().await;
    let app = spawn_app().await;
    let sent = held(&app, 3).await;
    app.confirm(WEB, "pay", &sent, "tok_ok")
        .await
        .assert_status(200);
    send_mail(&app, &sink).await;
    sink.stop();
    let owed = app
        .hold_ok(WEB, "hold-2", &hold_body(day(10), day(13), 1))
        .await;
    app.confirm(WEB, "pay-2", &owed, "tok_ok")
        .await
        .assert_status(200);
    send_mail(&app, &sink).await;

    // Act: a retention pass a day on, then 31 days on.
    let early = app.retention_after(1).await;
    let late = app.retention_after(30).await;

    // Assert
    assert_eq!(early.mail_outbox, 0);
    assert_eq!(late.mail_outbox, 1);
    assert_eq!(message_states(&app, &sent).await, Vec::new());
    assert_eq!(
        message_states(&app, &owed).await,
        vec![("confirmation".to_owned(), "pending".to_owned())]
    );
    app.finish().await;
}
