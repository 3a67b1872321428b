//! The payment saga's rows: its step log (`payment_sagas`) and the webhook receipts
//! (`payment_webhooks`). Both are written inside the transactions of the commands that
//! move the saga (T1 opens it beside the client's in-flight idempotency record; T2
//! resolves it beside the events), so they live with the rest of what those
//! transactions write. What the saga decides is `payments`' business; this module only
//! stores it.

use std::fmt;
use std::sync::OnceLock;

use chrono::{DateTime, Utc};
use columns::{columns, Columns, Statement};
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

/// Where a saga stands (the `payment_sagas.state` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SagaState {
    /// T1 committed; the gateway is being (or is to be) asked.
    Authorizing,
    /// The authorization confirmed the reservation.
    Confirmed,
    /// The card was declined; the hold was released.
    Declined,
    /// The authorization could not be kept (the hold had gone) and is given back.
    Refunded,
    /// The gateway never received the call and the hold is gone: nothing to do.
    Abandoned,
}

impl SagaState {
    pub const ALL: [SagaState; 5] = [
        Self::Authorizing,
        Self::Confirmed,
        Self::Declined,
        Self::Refunded,
        Self::Abandoned,
    ];

    /// The name stored in `payment_sagas.state` (the migration's CHECK lists the same).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Authorizing => "authorizing",
            Self::Confirmed => "confirmed",
            Self::Declined => "declined",
            Self::Refunded => "refunded",
            Self::Abandoned => "abandoned",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == stored)
    }
}

impl fmt::Display for SagaState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What T1 records before the gateway is called.
pub struct OpenSaga<'a> {
    pub reservation_id: Uuid,
    pub hotel_id: i64,
    pub gateway_key: &'a str,
    pub payment_token: &'a str,
    pub amount_cents: i64,
    /// ISO 4217 code of `amount_cents`.
    pub currency: &'a str,
    /// The client request waiting on the saga (its idempotency scope, key and hash).
    pub client: &'a str,
    pub client_key: &'a str,
    pub request_hash: &'a str,
    pub lease_until: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

columns! {
    /// The saga's row as [`open`] writes it.
    struct SagaRow {
        reservation_id: Uuid = "uuid",
        hotel_id: i64 = "bigint",
        gateway_key: String = "text",
        payment_token: String = "text",
        amount_cents: i64 = "bigint",
        currency: String = "text",
        state: &'static str = "text",
        client: String = "text",
        client_key: String = "text",
        request_hash: String = "text",
        lease_until: DateTime<Utc> = "timestamptz",
        now: DateTime<Utc> = "timestamptz",
    }
}

const OPEN: Statement = Statement::new(
    "INSERT INTO payment_sagas
        (reservation_id, hotel_id, gateway_key, payment_token, amount_cents, currency,
         state, client, client_key, request_hash, lease_until, created_at, updated_at)
     SELECT saga.reservation_id, saga.hotel_id, saga.gateway_key, saga.payment_token,
            saga.amount_cents, saga.currency, saga.state, saga.client, saga.client_key,
            saga.request_hash, saga.lease_until, saga.now, saga.now
       FROM {saga}
     ON CONFLICT (reservation_id) DO UPDATE
        SET state = EXCLUDED.state, client = EXCLUDED.client,
            client_key = EXCLUDED.client_key, request_hash = EXCLUDED.request_hash,
            lease_until = EXCLUDED.lease_until, updated_at = EXCLUDED.updated_at,
            attempts = payment_sagas.attempts + 1",
);

/// Opens the saga (or reopens one a previous attempt left), `authorizing`.
pub async fn open(conn: &mut PgConnection, saga: OpenSaga<'_>) -> Result<(), sqlx::Error> {
    let row = SagaRow {
        reservation_id: vec![saga.reservation_id],
        hotel_id: vec![saga.hotel_id],
        gateway_key: vec![saga.gateway_key.to_owned()],
        payment_token: vec![saga.payment_token.to_owned()],
        amount_cents: vec![saga.amount_cents],
        currency: vec![saga.currency.to_owned()],
        state: vec![SagaState::Authorizing.as_str()],
        client: vec![saga.client.to_owned()],
        client_key: vec![saga.client_key.to_owned()],
        request_hash: vec![saga.request_hash.to_owned()],
        lease_until: vec![saga.lease_until],
        now: vec![saga.now],
    };
    let sets: [(&str, &dyn Columns); 1] = [("saga", &row)];
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| OPEN.render(&sets));
    Statement::bind(sqlx::query(sql), &sets)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The gateway has not decided: the client was answered, so the saga waits for the
/// webhook (or recovery) alone, from `lease_until`.
pub async fn park(
    conn: &mut PgConnection,
    reservation_id: Uuid,
    lease_until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE payment_sagas
            SET client = NULL, client_key = NULL, request_hash = NULL,
                lease_until = $2, updated_at = $3
          WHERE reservation_id = $1 AND state = $4",
    )
    .bind(reservation_id)
    .bind(lease_until)
    .bind(now)
    .bind(SagaState::Authorizing.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The client request a saga was still answering for when it was resolved.
pub struct Waiting {
    pub client: String,
    pub client_key: String,
    pub request_hash: String,
}

/// Resolves an `authorizing` saga to `state`; the request still waiting on it, if any.
/// Nothing happens to a saga already resolved.
pub async fn resolve(
    conn: &mut PgConnection,
    reservation_id: Uuid,
    state: SagaState,
    provider_txn_id: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Option<Waiting>, sqlx::Error> {
    let row = sqlx::query(
        "UPDATE payment_sagas
            SET state = $2, provider_txn_id = COALESCE($3, provider_txn_id), updated_at = $4
          WHERE reservation_id = $1 AND state = $5
      RETURNING client, client_key, request_hash",
    )
    .bind(reservation_id)
    .bind(state.as_str())
    .bind(provider_txn_id)
    .bind(now)
    .bind(SagaState::Authorizing.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let client: Option<String> = row.try_get("client")?;
    let client_key: Option<String> = row.try_get("client_key")?;
    let request_hash: Option<String> = row.try_get("request_hash")?;
    Ok(match (client, client_key, request_hash) {
        (Some(client), Some(client_key), Some(request_hash)) => Some(Waiting {
            client,
            client_key,
            request_hash,
        }),
        _ => None,
    })
}

/// An `authorizing` saga whose lease ran out, leased again for recovery.
pub struct DueSaga {
    pub reservation_id: Uuid,
    pub gateway_key: String,
    pub payment_token: String,
    pub amount_cents: i64,
    /// ISO 4217 code of `amount_cents`, as [`open`] wrote it.
    pub currency: String,
    /// The request still waiting on it, if any (scope and key).
    pub client: Option<String>,
    pub client_key: Option<String>,
}

/// Leases up to `limit` sagas whose lease ran out by `now`, until `lease_until`. Safe
/// in several processes at once (SKIP LOCKED).
pub async fn lease_due(
    pool: &PgPool,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<DueSaga>, sqlx::Error> {
    let rows = sqlx::query(
        // The state is written out, not bound: a generic plan (the write path's) can
        // use the partial index `payment_sagas_open` only when its predicate is in the
        // statement itself; with a parameter it scanned the table (see
        // docs/scaling.md, `generic-plan-jit`).
        "UPDATE payment_sagas SET lease_until = $2, attempts = attempts + 1, updated_at = $1
          WHERE reservation_id IN (
                SELECT reservation_id FROM payment_sagas
                 WHERE state = 'authorizing' AND lease_until <= $1
                 ORDER BY lease_until
                 LIMIT $3
                 FOR UPDATE SKIP LOCKED)
          RETURNING reservation_id, gateway_key, payment_token, amount_cents, currency,
                    client, client_key",
    )
    .bind(now)
    .bind(lease_until)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(DueSaga {
                reservation_id: row.try_get("reservation_id")?,
                gateway_key: row.try_get("gateway_key")?,
                payment_token: row.try_get("payment_token")?,
                amount_cents: row.try_get("amount_cents")?,
                currency: row.try_get("currency")?,
                client: row.try_get("client")?,
                client_key: row.try_get("client_key")?,
            })
        })
        .collect()
}

/// Ends an `authorizing` saga that has nothing left to do.
pub async fn abandon(
    conn: &mut PgConnection,
    reservation_id: Uuid,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE payment_sagas SET state = $3, updated_at = $2
          WHERE reservation_id = $1 AND state = $4",
    )
    .bind(reservation_id)
    .bind(now)
    .bind(SagaState::Abandoned.as_str())
    .bind(SagaState::Authorizing.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Whether a webhook for this provider transaction was applied before.
pub async fn webhook_seen(pool: &PgPool, provider_txn_id: &str) -> Result<bool, sqlx::Error> {
    let seen: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM payment_webhooks WHERE provider_txn_id = $1")
            .bind(provider_txn_id)
            .fetch_optional(pool)
            .await?;
    Ok(seen.is_some())
}

/// A webhook as applied. `status` and `result` are the storage names the payment
/// saga's own enums give.
pub struct WebhookReceipt<'a> {
    pub provider_txn_id: &'a str,
    pub reservation_id: Uuid,
    pub status: &'static str,
    pub amount_cents: i64,
    pub result: &'static str,
    pub received_at: DateTime<Utc>,
}

/// Records a webhook in the transaction that applied it (once per provider
/// transaction).
pub async fn record_webhook(
    conn: &mut PgConnection,
    receipt: WebhookReceipt<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO payment_webhooks
            (provider_txn_id, reservation_id, status, amount_cents, result, received_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (provider_txn_id) DO NOTHING",
    )
    .bind(receipt.provider_txn_id)
    .bind(receipt.reservation_id)
    .bind(receipt.status)
    .bind(receipt.amount_cents)
    .bind(receipt.result)
    .bind(receipt.received_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_saga_state_reads_back_from_its_stored_name() {
        for state in SagaState::ALL {
            assert_eq!(SagaState::parse(state.as_str()), Some(state));
        }
        assert_eq!(SagaState::parse("paid"), None);
    }
}
