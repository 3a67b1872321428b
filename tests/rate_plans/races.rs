//! A restriction set while holds race for the same nights: it is decided in the same
//! decision as the rooms, so in the event log's commit order no hold that committed
//! after the restriction breaks it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use aggregates::restrictions::{check_stay, RestrictionSet};
use aggregates::{ReservationEvent, RoomNightEvent, RoomNightKey, StayDates, TimeZone};
use rand::{Rng, SeedableRng};
use serde_json::json;
use sqlx::Row;

use crate::support::*;

const CLIENTS: usize = 32;
const HOLDS_PER_CLIENT: usize = 6;
const NIGHTS: u64 = 12;

#[tokio::test]
async fn a_restriction_set_while_thirty_two_holds_race_binds_every_hold_committed_after_it() {
    // Arrange: plenty of rooms, so only the restriction refuses anything.
    let app = Arc::new(spawn_app().await);
    let first = day(10);
    app.seed_hotel(first, NIGHTS, 1_000).await;
    let done = Arc::new(AtomicUsize::new(0));

    // Act: 32 clients hold stays of one to three nights; once a quarter of the holds are
    // answered, staff require three nights from every arrival.
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let (app, done) = (app.clone(), done.clone());
        clients.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(client as u64);
            let mut outcomes = Vec::new();
            for n in 0..HOLDS_PER_CLIENT {
                let start = plus_days(first, rng.gen_range(0..NIGHTS - 3));
                let end = plus_days(start, rng.gen_range(1..=3));
                let mut body = hold_body(start, end, 1);
                body["guest"]["email"] = json!(format!("guest-{client}-{n}@example.com"));
                let reply = app.hold(WEB, &format!("race-{client}-{n}"), &body).await;
                done.fetch_add(1, Ordering::SeqCst);
                outcomes.push((reply.status.as_u16(), reply.json["error"].clone()));
            }
            outcomes
        }));
    }
    let staff = {
        let (app, done) = (app.clone(), done.clone());
        tokio::spawn(async move {
            while done.load(Ordering::SeqCst) < CLIENTS * HOLDS_PER_CLIENT / 4 {
                tokio::task::yield_now().await;
            }
            app.put_restrictions(
                HOTEL,
                KING,
                &json!({"start_date": first, "end_date": plus_days(first, NIGHTS),
                        "min_stay": 3}),
            )
            .await
        })
    };
    let mut outcomes = Vec::new();
    for client in clients {
        outcomes.extend(client.await.expect("client"));
    }
    staff.await.expect("staff").assert_status(200);

    // Assert: every answer is a hold or a refusal by the restriction, both happened,
    // and in commit order no stay held after the restriction committed breaks it.
    let held = outcomes.iter().filter(|(s, _)| *s == 201).count();
    let restricted = outcomes
        .iter()
        .filter(|(s, e)| *s == 409 && e == "restricted")
        .count();
    assert_eq!(held + restricted, outcomes.len(), "{outcomes:?}");
    assert!(
        held > 0 && restricted > 0,
        "{held} held, {restricted} restricted"
    );

    let rows = sqlx::query(
        "SELECT aggregate_type, aggregate_id, payload FROM events
          ORDER BY transaction_id, global_position",
    )
    .fetch_all(&app.db.pool)
    .await
    .expect("events");
    let timezone = TimeZone::parse("Europe/Lisbon").expect("zone");
    let mut in_force: BTreeMap<chrono::NaiveDate, RestrictionSet> = BTreeMap::new();
    let (mut checked, mut after_restriction) = (0, 0);
    for row in rows {
        let kind: String = row.get("aggregate_type");
        let payload: serde_json::Value = row.get("payload");
        match kind.as_str() {
            "room_night" => {
                let event: RoomNightEvent = serde_json::from_value(payload).expect("event");
                if let RoomNightEvent::RestrictionsSet {
                    rate_plan_id,
                    restrictions,
                } = event
                {
                    let key = RoomNightKey::parse_stream_id(&row.get::<String, _>("aggregate_id"))
                        .expect("stream id");
                    in_force
                        .entry(key.night)
                        .or_default()
                        .set(rate_plan_id, restrictions);
                }
            }
            "reservation" => {
                let event: ReservationEvent = serde_json::from_value(payload).expect("event");
                if let ReservationEvent::ReservationHeld(details) = event {
                    let stay: StayDates = details.stay;
                    let today = aggregates::types::local_date(details.created_at, timezone);
                    let verdict = check_stay(&stay, today, |night| {
                        in_force
                            .get(&night)
                            .map(|set| set.for_plan(details.rate_plan_id))
                            .unwrap_or_default()
                    });
                    assert_eq!(
                        verdict,
                        Ok(()),
                        "{stay} was held after a restriction it breaks committed"
                    );
                    checked += 1;
                    if !in_force.is_empty() {
                        after_restriction += 1;
                    }
                }
            }
            _ => {}
        }
    }
    assert_eq!(checked, held, "every hold is in the log once");
    assert_eq!(
        in_force.len() as u64,
        NIGHTS,
        "the restriction is on every night"
    );
    assert!(
        after_restriction > 0,
        "some three-night stays were held after the restriction"
    );
    // Audit verify judges every hold the same way, in the log's commit order.
    let verified = app.get("/v1/audit/verify", Some(AUDITOR)).await;
    assert_eq!(verified.assert_status(200)["ok"], true, "{}", verified.text);
    assert_invariants(&app.db.pool).await;
    match Arc::try_unwrap(app) {
        Ok(app) => app.finish().await,
        Err(_) => panic!("the clients still hold the app"),
    }
}
