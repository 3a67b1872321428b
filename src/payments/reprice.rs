//! Changing the dates of a paid stay: the card is asked for a dearer price before the
//! change is made, never after.
//!
//! The change is decided as any other; when the new price is more than the card covers,
//! the decision refuses with `PaymentRequired` and writes nothing (not even the
//! idempotency record). The gateway is then asked to increase the authorization by the
//! shortfall, under the ledger's next authorization key, outside any transaction, and
//! the change is decided again with the increment in hand: the same transaction records
//! `AuthorizationIncreased`, `DatesChanged` and whatever the ledger owes (the difference
//! captured, if the stay was captured already). Declined: 402, nothing changed.
//!
//! Between the increment and the change the new nights are not held: if they go
//! meanwhile (or the price rose again), the change is refused as any other would be,
//! and the increment is recorded on its own so the ledger still says what the card is
//! authorized for; the surplus is released when the stay is captured (a capture of
//! less than the authorization releases the rest) or voided. A crash between the
//! gateway's answer and the change leaves the increment unrecorded until the client
//! retries (the same key gets the same answer); if it never does, the same release
//! applies, and only the ledger's `authorized_cents` is short of the provider's.

use aggregates::reservation::ledger::authorization_key;
use aggregates::{Cents, Increment, Rejection, ReservationId, StayDates};

use super::gateway::GatewayError;
use super::PaymentService;
use crate::commands::{Caller, ReservationView};
use crate::error::CommandError;
use crate::write::IdempotencyKey;

/// How many times a change is decided again after an increment before giving up (the
/// price would have to rise between every decision and the next).
const ATTEMPTS: usize = 3;

impl PaymentService {
    /// Moves a reservation to `new_stay`, asking the card for a dearer price first.
    #[tracing::instrument(skip_all, fields(reservation = %reservation_id))]
    pub async fn change_dates(
        &self,
        caller: &Caller,
        scope: &str,
        key: IdempotencyKey,
        reservation_id: ReservationId,
        new_stay: StayDates,
        expected_total_cents: Option<Cents>,
    ) -> Result<ReservationView, CommandError> {
        let mut increment: Option<Increment> = None;
        for _ in 0..ATTEMPTS {
            let result = self
                .commands
                .change_dates_as(
                    caller,
                    scope,
                    key.clone(),
                    reservation_id,
                    new_stay,
                    expected_total_cents,
                    increment.clone(),
                )
                .await;
            let shortfall = match result {
                Err(CommandError::Rejected(Rejection::PaymentRequired { shortfall_cents })) => {
                    shortfall_cents
                }
                other => {
                    if other.is_err() {
                        self.keep_increment(caller, reservation_id, increment)
                            .await?;
                    }
                    return other;
                }
            };
            // Granted before, but not enough now (the price rose between): keep it on
            // the ledger and ask for the rest.
            self.keep_increment(caller, reservation_id, increment.take())
                .await?;
            increment = Some(self.ask_for(reservation_id, shortfall).await?);
        }
        self.keep_increment(caller, reservation_id, increment)
            .await?;
        Err(CommandError::Contention {
            attempts: ATTEMPTS as u32,
        })
    }

    /// Asks the gateway to raise the authorization by `shortfall`.
    async fn ask_for(
        &self,
        reservation_id: ReservationId,
        shortfall: Cents,
    ) -> Result<Increment, CommandError> {
        let ledger = self
            .commands
            .ledger(reservation_id)
            .await?
            .ok_or(CommandError::Rejected(Rejection::ReservationNotFound))?;
        let gateway_key = authorization_key(reservation_id, ledger.authorizations + 1);
        let answer = self
            .call(
                self.gateway
                    .increment(&gateway_key, &ledger.provider_txn_id, shortfall.get()),
            )
            .await;
        match answer {
            Ok(true) => Ok(Increment {
                amount_cents: shortfall,
                gateway_key,
            }),
            Ok(false) | Err(GatewayError::Refused(_)) => {
                metrics::counter!("payment_increments_total", "result" => "declined").increment(1);
                Err(CommandError::PaymentDeclined {
                    shortfall_cents: shortfall.get(),
                })
            }
            Err(e) => Err(CommandError::PaymentUnavailable(e.to_string())),
        }
    }

    /// Records a granted increment whose change did not happen.
    async fn keep_increment(
        &self,
        caller: &Caller,
        reservation_id: ReservationId,
        increment: Option<Increment>,
    ) -> Result<(), CommandError> {
        if let Some(increment) = increment {
            self.commands
                .record_increment(caller, reservation_id, increment)
                .await?;
        }
        Ok(())
    }
}
