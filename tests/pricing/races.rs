//! Catalog changes racing holds, under every write strategy. A currency change: whichever
//! commits first, no stay is ever live in a currency other than its hotel's (a hold that
//! read the hotel before the change committed must not commit after it in the old
//! currency; a change must not commit while a stay in the old currency is live). A tax
//! change: every sale follows, in the log, the taxes it was sold with, as `audit verify`
//! replays them.

use std::sync::Arc;

use aggregates::taxes::{Tax, TaxKind, Taxes};

use aggregates::booking::InventoryUpdate;
use aggregates::{Cents, Currency, HotelDetails, HotelId, Rejection, RoomTypeDetails};
use app::commands::{Caller, CommandService, HoldRequest};
use chrono::Days;
use store::error::CommandError;
use store::write::Strategy;
use tokio::sync::Barrier;

use crate::support::*;

const HOTELS: i64 = 8;
const HOLDS_PER_HOTEL: usize = 12;

async fn hotel(svc: &CommandService, id: i64) -> HotelId {
    let staff = Caller::Staff("staff".into());
    let hotel = HotelId::parse(id).expect("id");
    svc.set_hotel(
        &staff,
        hotel,
        HotelDetails::parse("Casa", "Lisbon", "Europe/Lisbon").expect("details"),
        None,
    )
    .await
    .expect("hotel");
    svc.set_room_type(
        &staff,
        hotel,
        king(),
        RoomTypeDetails::parse("king", 2).expect("rt"),
    )
    .await
    .expect("room type");
    let first = day(30);
    svc.set_inventory(
        &staff,
        hotel,
        king(),
        stay(first, first.checked_add_days(Days::new(3)).expect("date")),
        InventoryUpdate {
            total_rooms: Some(100),
            overbooking_allowance: Some(0),
            rate_cents: Some(Cents::new(18_000)),
        },
    )
    .await
    .expect("inventory");
    hotel
}

/// A city tax of `id` cents per stay: each hotel's own, so a sale's snapshot names it.
fn city_tax(id: i64) -> Taxes {
    Taxes::parse(vec![Tax::parse(
        "CITY",
        TaxKind::PerStay {
            amount: Cents::new(id),
        },
    )
    .expect("tax")])
    .expect("taxes")
}

async fn race(strategy: Strategy) {
    let db = TestDb::new().await;
    let svc = db.service(strategy);
    let chf = Currency::parse("CHF").expect("currency");
    let (mut changed, mut refused) = (0, 0);
    for id in 1..=HOTELS {
        let hotel_id = hotel(&svc, id).await;
        let barrier = Arc::new(Barrier::new(HOLDS_PER_HOTEL + 1));
        let mut holds = Vec::new();
        for n in 0..HOLDS_PER_HOTEL {
            let (svc, barrier) = (svc.clone(), barrier.clone());
            holds.push(tokio::spawn(async move {
                let request = HoldRequest {
                    hotel_id,
                    ..hold_request(stay(day(30), day(32)), 1, n)
                };
                barrier.wait().await;
                for attempt in 0..20 {
                    let key = key(&format!("currency-{id}-{n}-{attempt}"));
                    match svc.hold("web", "web", key, request.clone()).await {
                        Err(CommandError::Contention { .. }) => continue,
                        other => return other.map(|_| ()),
                    }
                }
                Ok(())
            }));
        }
        barrier.wait().await;
        // Half the rounds change while the holds are being decided, half just after
        // the first of them.
        if id % 2 == 0 {
            tokio::task::yield_now().await;
        }
        let staff = Caller::Staff("staff".into());
        // A tax change (taken whatever is live) racing too, beside the currency change.
        let taxes = {
            let (svc, staff) = (svc.clone(), staff.clone());
            tokio::spawn(async move { svc.set_taxes(&staff, hotel_id, city_tax(id)).await })
        };
        let change = svc
            .set_hotel(
                &staff,
                hotel_id,
                HotelDetails::parse("Casa", "Lisbon", "Europe/Lisbon").expect("details"),
                Some(chf),
            )
            .await;
        match change {
            Ok(_) => changed += 1,
            Err(CommandError::Rejected(Rejection::CurrencyInUse { .. })) => refused += 1,
            Err(e) => panic!("the change failed: {e:?}"),
        }
        for hold in holds {
            hold.await.expect("task").expect("hold");
        }
        taxes.await.expect("task").expect("taxes are always taken");
        // Every live stay is in the hotel's currency, whichever won.
        let (currency,): (Option<String>,) =
            sqlx::query_as("SELECT state->'details'->>'currency' FROM hotels WHERE hotel_id = $1")
                .bind(id)
                .fetch_one(&db.pool)
                .await
                .expect("hotel");
        let currency = currency.unwrap_or_else(|| "EUR".to_owned());
        let stays: Vec<(String,)> = sqlx::query_as(
            "SELECT coalesce(state->'details'->>'currency', 'EUR') FROM reservations
              WHERE hotel_id = $1 AND status IN ('held', 'confirmed', 'checked_in')",
        )
        .bind(id)
        .fetch_all(&db.pool)
        .await
        .expect("stays");
        assert_eq!(stays.len(), HOLDS_PER_HOTEL, "every hold was taken");
        for (stay_currency,) in stays {
            assert_eq!(stay_currency, currency, "hotel {id} ({strategy:?})");
        }
    }
    eprintln!("{strategy:?}: {changed} changes taken, {refused} refused");
    // Every sale recorded the currency and the taxes in force where it stands in the log.
    assert_invariants_and_verified(&db.pool).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_currency_change_racing_group_committed_holds_leaves_no_stay_in_another_currency() {
    race(Strategy::Group).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_currency_change_racing_pessimistic_holds_leaves_no_stay_in_another_currency() {
    race(Strategy::Pessimistic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_currency_change_racing_optimistic_holds_leaves_no_stay_in_another_currency() {
    race(Strategy::Optimistic).await;
}
