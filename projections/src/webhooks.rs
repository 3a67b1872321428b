//! Making the deliveries: a projection (`webhooks`) over the event log that writes, in
//! the transaction that moves its checkpoint, one delivery per matching subscription
//! and event. The runner reads the log in commit order and never skips an event, so a
//! subscriber gets every matching event once, in order, whether it was answering or
//! not when the event committed; a batch applied again makes nothing twice
//! (`(subscription, position, type)` is unique).
//!
//! `reservation.*` carry the event's own fields without personal data (the guest and a
//! cancellation's reason stay sealed in the log: a partner reads a guest through the
//! API, as its role allows). `inventory.changed` is made once per room type a
//! transaction changed the nights of (a hold, a release, inventory, a rate, a
//! restriction) and carries the nights' ARI as the write side holds them when the
//! delivery is made — a snapshot, so the last delivery of a room type is its state.
//! `block.created`, `block.changed` and `block.released` carry a group block's terms
//! (with the hotel's currency) as its event records them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::log::StoredEvent;
use crate::runner::Projection;
use aggregates::contract::{parse_reservation_stream_id, ReservationEventType};
use aggregates::{AggregateType, BlockEvent, ReservationEvent, RoomNightEvent, TypedEvent};
use chrono::{DateTime, NaiveDate, Utc};
use columns::{columns, Columns, Statement};
use serde_json::{json, Value};
use sqlx::{PgConnection, Row};

/// The projection's name: its checkpoint row and its lag metrics.
pub const NAME: &str = "webhooks";

/// How long a delivery is retried before it is `failed`.
#[derive(Debug, Clone, Copy)]
pub struct WebhookProjection {
    pub retry_window: chrono::Duration,
}

columns! {
    /// `webhook_deliveries` to make, column by column.
    struct DeliveryRows {
        delivery_id: String = "text",
        subscription_id: String = "text",
        event_type: &'static str = "text",
        ordering_key: String = "text",
        position: i64 = "bigint",
        body: Value = "jsonb",
        created_at: DateTime<Utc> = "timestamptz",
    }
}

/// The deliveries, made at `$1` and retried for `$2`; a batch applied again makes
/// nothing twice.
const INSERT_DELIVERIES: Statement = Statement::new(
    "INSERT INTO webhook_deliveries
         (delivery_id, subscription_id, event_type, ordering_key, position, body,
          created_at, next_attempt_at, give_up_at)
     SELECT batch.delivery_id, batch.subscription_id, batch.event_type, batch.ordering_key,
            batch.position, batch.body, batch.created_at, $1, $1 + $2::interval
       FROM {batch}
     ON CONFLICT (subscription_id, position, event_type) DO NOTHING",
)
.after(2);

/// The webhook type of a reservation event, if partners are told of it.
pub fn reservation_type(event: &ReservationEvent) -> Option<&'static str> {
    Some(match event {
        ReservationEvent::ReservationHeld(_) => "reservation.held",
        ReservationEvent::ReservationConfirmed { .. } => "reservation.confirmed",
        ReservationEvent::ReservationCancelled { .. } => "reservation.cancelled",
        ReservationEvent::HoldExpired { .. } => "reservation.expired",
        ReservationEvent::PaymentDeclined { .. } => "reservation.declined",
        ReservationEvent::DatesChanged { .. } => "reservation.dates_changed",
        ReservationEvent::GuestCheckedIn { .. } => "reservation.checked_in",
        ReservationEvent::GuestCheckedOut { .. } => "reservation.checked_out",
        ReservationEvent::NoShowRecorded { .. } => "reservation.no_show",
        _ => return None,
    })
}

/// Whether a night's event changes what a channel manager shows of it.
fn changes_ari(event: &RoomNightEvent) -> bool {
    !matches!(event, RoomNightEvent::HoldConfirmed { .. })
}

/// A subscription, as the projection matches events against it.
struct Subscriber {
    id: String,
    /// Empty: every type.
    types: Vec<String>,
    hotels: Option<Vec<i64>>,
}

impl Subscriber {
    fn wants(&self, event_type: &str, hotel: i64) -> bool {
        (self.types.is_empty() || self.types.iter().any(|t| t == event_type))
            && self.hotels.as_ref().is_none_or(|h| h.contains(&hotel))
    }
}

/// One delivery to make.
struct Made {
    event_type: &'static str,
    hotel: i64,
    ordering_key: String,
    position: i64,
    created_at: DateTime<Utc>,
    data: Value,
}

/// The currency of each reservation the batch has events of (a reservation's currency
/// never changes after its hold; stays sold before hotels had one are in euros).
async fn currencies(
    tx: &mut PgConnection,
    batch: &[StoredEvent],
) -> anyhow::Result<std::collections::HashMap<uuid::Uuid, String>> {
    let ids: Vec<uuid::Uuid> = batch
        .iter()
        .filter(|e| e.aggregate_type == AggregateType::Reservation.as_str())
        .filter_map(|e| parse_reservation_stream_id(&e.aggregate_id).ok())
        .map(|(_, id)| id.as_uuid())
        .collect();
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let rows: Vec<(uuid::Uuid, String)> = sqlx::query_as(
        "SELECT reservation_id, coalesce(state->'details'->>'currency', 'EUR')
           FROM reservations WHERE reservation_id = ANY($1)",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().collect())
}

/// A cancellation policy as the API writes it (`{"refundable": false}`, or the hours
/// and the share of a refundable one).
fn policy_json(policy: aggregates::cancellation::CancellationPolicy) -> Value {
    match policy {
        aggregates::cancellation::CancellationPolicy::NonRefundable => {
            json!({"refundable": false})
        }
        aggregates::cancellation::CancellationPolicy::Refundable {
            full_refund_hours,
            partial_refund_hours,
            partial_refund_percent,
        } => json!({"refundable": true, "full_refund_hours": full_refund_hours,
                    "partial_refund_hours": partial_refund_hours,
                    "partial_refund_percent": partial_refund_percent}),
    }
}

/// The nights of one (hotel, room type) a transaction changed.
#[derive(Default)]
struct Touched {
    nights: Vec<NaiveDate>,
    position: i64,
    at: Option<DateTime<Utc>>,
}

impl Projection for WebhookProjection {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn apply(
        &mut self,
        tx: &mut PgConnection,
        _generation: i32,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        let rows = sqlx::query(
            "SELECT subscription_id, event_types, hotel_ids FROM webhook_subscriptions",
        )
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut subscribers = Vec::with_capacity(rows.len());
        for row in &rows {
            subscribers.push(Subscriber {
                id: row.try_get("subscription_id")?,
                types: row.try_get("event_types")?,
                hotels: row.try_get("hotel_ids")?,
            });
        }
        let currencies = currencies(&mut *tx, batch).await?;
        let mut made = Vec::new();
        // (transaction, hotel, room type) -> nights, in the order first met.
        let mut touched: BTreeMap<(i64, i64, i64), Touched> = BTreeMap::new();
        for stored in batch {
            match stored.typed_for(NAME)? {
                TypedEvent::Reservation {
                    hotel_id,
                    reservation_id,
                    event,
                } => {
                    let Some(event_type) = reservation_type(event) else {
                        continue;
                    };
                    let mut data = crate::feed::EventOut::from(stored).data;
                    let personal = ReservationEventType::parse(&stored.event_type)
                        .and_then(ReservationEventType::personal_field);
                    if let (Some(field), Some(fields)) = (personal, data.as_object_mut()) {
                        fields.remove(field.payload_key());
                    }
                    // Every amount a reservation's delivery carries is in its currency,
                    // which only its first event records: said on every delivery.
                    let currency = currencies
                        .get(&reservation_id.as_uuid())
                        .map_or("EUR", String::as_str);
                    let mut body = json!({
                        "reservation_id": reservation_id,
                        "reference": reservation_id.reference().to_string(),
                        "hotel_id": hotel_id.get(),
                        "version": stored.sequence,
                        "currency": currency,
                    });
                    // A hold says what it holds: every room type, a line each (as the
                    // reservation's answer lists them).
                    if let ReservationEvent::ReservationHeld(details) = event {
                        // Every line's rooms, as the reservation's `rooms` counts them.
                        body["rooms"] = json!(details.all_rooms());
                        body["lines"] = details
                            .lines()
                            .iter()
                            .map(|line| {
                                json!({
                                    "room_type_id": line.room_type_id.get(),
                                    "rooms": line.rooms.get(),
                                    "guests": line.guests.get(),
                                    "rate_plan_id": line.rate_plan_id.map(|p| p.get()),
                                    "cancellation_policy": policy_json(line.cancellation_policy),
                                    "total_cents": line.total_cents.get(),
                                })
                            })
                            .collect();
                    }
                    if let (Some(body), Value::Object(fields)) = (body.as_object_mut(), data) {
                        for (k, v) in fields {
                            body.entry(k).or_insert(v);
                        }
                    }
                    made.push(Made {
                        event_type,
                        hotel: hotel_id.get(),
                        ordering_key: format!("reservation:{reservation_id}"),
                        position: stored.position,
                        created_at: stored.recorded_at,
                        data: body,
                    });
                }
                TypedEvent::Block {
                    hotel_id,
                    code,
                    event,
                } => {
                    let (event_type, mut data) = match event {
                        BlockEvent::BlockTermsSet {
                            terms, release_at, ..
                        } => (
                            if stored.sequence == 1 {
                                "block.created"
                            } else {
                                "block.changed"
                            },
                            json!({
                                "name": terms.name(),
                                "room_type_id": terms.room_type_id().get(),
                                "start_date": terms.stay().start(),
                                "end_date": terms.stay().end(),
                                "rooms": terms.rooms().get(),
                                "rate_cents": terms.rate_cents().get(),
                                "release_date": terms.release_date(),
                                "release_at": release_at,
                            }),
                        ),
                        BlockEvent::BlockClosed { at, reason } => (
                            "block.released",
                            json!({"released_at": at, "released_by": reason.as_str()}),
                        ),
                    };
                    data["hotel_id"] = json!(hotel_id.get());
                    data["code"] = json!(code.as_str());
                    data["version"] = json!(stored.sequence);
                    data["currency"] = json!(hotel_currency(&mut *tx, hotel_id.get()).await?);
                    made.push(Made {
                        event_type,
                        hotel: hotel_id.get(),
                        ordering_key: format!("block:{hotel_id}:{code}"),
                        position: stored.position,
                        created_at: stored.recorded_at,
                        data,
                    });
                }
                TypedEvent::RoomNight { key, event } if changes_ari(event) => {
                    let entry = touched
                        .entry((
                            stored.transaction_id,
                            key.hotel_id.get(),
                            key.room_type_id.get(),
                        ))
                        .or_insert_with(|| Touched {
                            position: stored.position,
                            ..Touched::default()
                        });
                    entry.nights.push(key.night);
                    entry.at.get_or_insert(stored.recorded_at);
                }
                _ => {}
            }
        }
        for ((_, hotel, room_type), touched) in touched {
            if !subscribers
                .iter()
                .any(|s| s.wants("inventory.changed", hotel))
            {
                continue;
            }
            let data = ari(&mut *tx, hotel, room_type, &touched.nights).await?;
            made.push(Made {
                event_type: "inventory.changed",
                hotel,
                ordering_key: format!("inventory:{hotel}:{room_type}"),
                position: touched.position,
                created_at: touched.at.unwrap_or_else(Utc::now),
                data,
            });
        }
        let mut rows = DeliveryRows::default();
        for made in &made {
            for subscriber in subscribers
                .iter()
                .filter(|s| s.wants(made.event_type, made.hotel))
            {
                let id = format!("msg_{}", uuid::Uuid::now_v7().simple());
                rows.subscription_id.push(subscriber.id.clone());
                rows.body.push(json!({
                    "id": id,
                    "type": made.event_type,
                    "created_at": made.created_at,
                    "data": made.data,
                }));
                rows.delivery_id.push(id);
                rows.event_type.push(made.event_type);
                rows.ordering_key.push(made.ordering_key.clone());
                rows.position.push(made.position);
                rows.created_at.push(made.created_at);
            }
        }
        if rows.is_empty() {
            return Ok(());
        }
        let made_at = Utc::now();
        let sets: [(&str, &dyn Columns); 1] = [("batch", &rows)];
        static SQL: OnceLock<String> = OnceLock::new();
        let sql = SQL.get_or_init(|| INSERT_DELIVERIES.render(&sets));
        let query = sqlx::query(sql)
            .bind(made_at)
            .bind(format!("{} seconds", self.retry_window.num_seconds()));
        Statement::bind(query, &sets).execute(&mut *tx).await?;
        metrics::counter!("webhook_deliveries_made_total").increment(rows.len() as u64);
        Ok(())
    }

    async fn clear(&mut self, _conn: &mut PgConnection, _generation: i32) -> anyhow::Result<()> {
        // Deliveries are not a model to rebuild: what was made stays made (and sent).
        Ok(())
    }
}

/// A hotel's currency (the euro for one stored before hotels had one).
async fn hotel_currency(conn: &mut PgConnection, hotel: i64) -> anyhow::Result<String> {
    let currency: Option<String> = sqlx::query_scalar(
        "SELECT coalesce(state->'details'->>'currency', 'EUR') FROM hotels WHERE hotel_id = $1",
    )
    .bind(hotel)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(currency.unwrap_or_else(|| "EUR".to_owned()))
}

/// The ARI of `nights` of a room type as the write side holds them now.
async fn ari(
    conn: &mut PgConnection,
    hotel: i64,
    room_type: i64,
    nights: &[NaiveDate],
) -> anyhow::Result<Value> {
    let rows = sqlx::query(
        "SELECT night, total_rooms, overbooking_allowance, rate_cents, confirmed, held,
                blocked, restrictions, plan_rates
           FROM room_nights
          WHERE hotel_id = $1 AND room_type_id = $2 AND night = ANY($3)
          ORDER BY night",
    )
    .bind(hotel)
    .bind(room_type)
    .bind(nights)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let total: i32 = row.try_get("total_rooms")?;
        let allowance: i32 = row.try_get("overbooking_allowance")?;
        let confirmed: i32 = row.try_get("confirmed")?;
        let held: i32 = row.try_get("held")?;
        let blocked: i32 = row.try_get("blocked")?;
        let restrictions: Option<Value> = row.try_get("restrictions")?;
        let plan_rates: Option<Value> = row.try_get("plan_rates")?;
        out.push(json!({
            "date": row.try_get::<NaiveDate, _>("night")?,
            "total_rooms": total,
            "overbooking_allowance": allowance,
            "held": held,
            "confirmed": confirmed,
            "blocked": blocked,
            "remaining": aggregates::room_night::rooms_left(
                i64::from(total),
                i64::from(allowance),
                i64::from(confirmed),
                i64::from(held) + i64::from(blocked),
            ),
            "rate_cents": row.try_get::<i64, _>("rate_cents")?,
            "plan_rates": plan_rates.unwrap_or_else(|| json!({})),
            "restrictions": restrictions.unwrap_or_else(|| json!({})),
        }));
    }
    let first = rows
        .first()
        .map(|r| r.try_get::<NaiveDate, _>("night"))
        .transpose()?;
    let last = rows
        .last()
        .map(|r| r.try_get::<NaiveDate, _>("night"))
        .transpose()?;
    Ok(json!({
        "hotel_id": hotel,
        "room_type_id": room_type,
        "start_date": first,
        "end_date": last.and_then(|d| d.succ_opt()),
        "nights": out,
    }))
}
