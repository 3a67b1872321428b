//! The end-of-run check in PostgreSQL, on one snapshot: no night is oversold, every
//! night's counters are the sums of its allocation rows, and every hold the server
//! acknowledged with 201 exists.

use std::collections::HashSet;

use anyhow::Context;
use serde::Serialize;
use sqlx::postgres::PgPoolOptions;
use sqlx::Row;
use uuid::Uuid;

const BATCH: usize = 5_000;

#[derive(Debug, Serialize)]
pub struct InvariantReport {
    pub ok: bool,
    pub nights_checked: i64,
    /// Nights with `confirmed + held + blocked > total_rooms + overbooking_allowance`.
    pub oversold_nights: i64,
    /// Nights whose counters differ from the sums of their allocations.
    pub counter_mismatches: i64,
    pub acknowledged_holds: usize,
    pub acknowledged_found: usize,
    /// Up to ten of the problems, for a person.
    pub problems: Vec<String>,
}

pub async fn check(database_url: &str, acknowledged: &[Uuid]) -> anyhow::Result<InvariantReport> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(database_url)
        .await
        .context("connecting to PostgreSQL for the invariant check")?;
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut *tx)
        .await?;
    let mut problems = Vec::new();

    let nights_checked: i64 = sqlx::query_scalar("SELECT count(*) FROM room_nights")
        .fetch_one(&mut *tx)
        .await?;

    let oversold = sqlx::query(
        "SELECT hotel_id, room_type_id, night::text AS night, confirmed, held, blocked,
                total_rooms, overbooking_allowance, count(*) OVER () AS n
           FROM room_nights
          WHERE confirmed + held + blocked > total_rooms + overbooking_allowance
          ORDER BY hotel_id, room_type_id, night
          LIMIT 5",
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut oversold_nights = 0;
    for row in &oversold {
        oversold_nights = row.try_get::<i64, _>("n")?;
        problems.push(format!(
            "night {}:{}:{} oversold: confirmed {} + held {} + blocked {} > {} rooms + {} allowed",
            row.try_get::<i64, _>("hotel_id")?,
            row.try_get::<i64, _>("room_type_id")?,
            row.try_get::<String, _>("night")?,
            row.try_get::<i32, _>("confirmed")?,
            row.try_get::<i32, _>("held")?,
            row.try_get::<i32, _>("blocked")?,
            row.try_get::<i32, _>("total_rooms")?,
            row.try_get::<i32, _>("overbooking_allowance")?,
        ));
    }

    let mismatched = sqlx::query(
        "WITH sums AS (
             SELECT hotel_id, room_type_id, night,
                    coalesce(sum(rooms) FILTER (WHERE expires_at IS NULL), 0) AS confirmed,
                    coalesce(sum(rooms) FILTER (WHERE expires_at IS NOT NULL), 0) AS held
               FROM room_night_allocations
              GROUP BY hotel_id, room_type_id, night)
         SELECT n.hotel_id, n.room_type_id, n.night::text AS night,
                n.confirmed, n.held,
                coalesce(s.confirmed, 0)::bigint AS sum_confirmed,
                coalesce(s.held, 0)::bigint AS sum_held,
                count(*) OVER () AS n
           FROM room_nights n
           FULL JOIN sums s USING (hotel_id, room_type_id, night)
          WHERE n.night IS NULL
             OR n.confirmed <> coalesce(s.confirmed, 0)
             OR n.held <> coalesce(s.held, 0)
          ORDER BY 1, 2, 3
          LIMIT 5",
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut counter_mismatches = 0;
    for row in &mismatched {
        counter_mismatches = row.try_get::<i64, _>("n")?;
        problems.push(format!(
            "night {}:{}:{}: counters confirmed {} held {}, allocations confirmed {} held {}",
            row.try_get::<Option<i64>, _>("hotel_id")?.unwrap_or(0),
            row.try_get::<Option<i64>, _>("room_type_id")?.unwrap_or(0),
            row.try_get::<Option<String>, _>("night")?
                .unwrap_or_default(),
            shown(row.try_get::<Option<i32>, _>("confirmed")?),
            shown(row.try_get::<Option<i32>, _>("held")?),
            row.try_get::<i64, _>("sum_confirmed")?,
            row.try_get::<i64, _>("sum_held")?,
        ));
    }

    let mut acknowledged_found = 0;
    for batch in acknowledged.chunks(BATCH) {
        let found: Vec<Uuid> = sqlx::query_scalar(
            "SELECT reservation_id FROM reservations WHERE reservation_id = ANY($1)",
        )
        .bind(batch)
        .fetch_all(&mut *tx)
        .await?;
        acknowledged_found += found.len();
        if found.len() != batch.len() {
            let found: HashSet<Uuid> = found.into_iter().collect();
            for missing in batch.iter().filter(|id| !found.contains(id)).take(5) {
                problems.push(format!(
                    "reservation {missing} was acknowledged (201) but does not exist"
                ));
            }
        }
    }
    tx.rollback().await?;
    pool.close().await;
    problems.truncate(10);
    Ok(InvariantReport {
        ok: oversold_nights == 0
            && counter_mismatches == 0
            && acknowledged_found == acknowledged.len(),
        nights_checked,
        oversold_nights,
        counter_mismatches,
        acknowledged_holds: acknowledged.len(),
        acknowledged_found,
        problems,
    })
}

/// A counter of a night that may be missing (an allocation without its night).
fn shown(counter: Option<i32>) -> String {
    counter.map_or("(no night row)".to_owned(), |c| c.to_string())
}
