//! Changing the dates of a paid stay: the card is asked for a dearer price before the
//! change is made, never after.
//!
//! The saga, as for a confirmation:
//!
//! 1. The change is decided as any other; when the new price is more than the card
//!    covers, the decision refuses with `PaymentRequired` and writes nothing (not even
//!    the idempotency record).
//! 2. **T1** holds the nights the move enters (`DateChangeHeld`, judged as the move
//!    itself: limits, restrictions, rooms left), for a little longer than the gateway
//!    may take, so they cannot be sold while the card is asked. Sold out: 409, nothing
//!    charged.
//! 3. The gateway is asked to increase the authorization by the shortfall, under the
//!    ledger's next authorization key, outside any transaction.
//! 4. **T2** decides the change again with the increment in hand: the held nights become
//!    the sale, and the same transaction records `AuthorizationIncreased`,
//!    `DatesChanged` and whatever the ledger owes (the difference captured, if the stay
//!    was captured already). Declined: the held nights are released
//!    (`DateChangeReleased`) and the answer is 402, the stay unchanged.
//!
//! If T2 still fails (the price rose again meanwhile, or the hold lapsed and the nights
//! went), the increment is recorded on its own so the ledger says what the card is
//! authorized for, and the held nights are released; the surplus is released when the
//! stay is captured (a capture of less than the authorization releases the rest) or
//! voided. A crash after T1 leaves the held nights to lapse on their own within
//! seconds; a crash between the gateway's answer and T2 leaves the increment unrecorded
//! until the client retries (the same key gets the same answer); if it never does, the
//! same release applies, and only the ledger's `authorized_cents` is short of the
//! provider's.

use aggregates::reservation::ledger::authorization_key;
use aggregates::{Cents, Increment, Rejection, ReservationId, StayDates};
use chrono::{DateTime, Utc};

use super::gateway::GatewayError;
use super::PaymentService;
use crate::commands::{Caller, ReservationView};
use store::error::CommandError;
use store::write::IdempotencyKey;

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
                .change_dates(
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
                        self.release(caller, reservation_id, new_stay).await?;
                    }
                    return other;
                }
            };
            // Granted before, but not enough now (the price rose between): keep it on
            // the ledger and ask for the rest.
            self.keep_increment(caller, reservation_id, increment.take())
                .await?;
            // T1: the new nights are held while the card is asked.
            self.commands
                .hold_date_change(caller, reservation_id, new_stay, self.hold_until())
                .await?;
            match self.ask_for(reservation_id, shortfall).await {
                Ok(granted) => increment = Some(granted),
                Err(e) => {
                    self.release(caller, reservation_id, new_stay).await?;
                    return Err(e);
                }
            }
        }
        self.keep_increment(caller, reservation_id, increment)
            .await?;
        self.release(caller, reservation_id, new_stay).await?;
        Err(CommandError::Contention {
            attempts: ATTEMPTS as u32,
        })
    }

    /// How long the nights of a move are held while the card is asked: the gateway's
    /// whole timeout, twice, and a few seconds for the two transactions around it.
    fn hold_until(&self) -> DateTime<Utc> {
        self.commands.now()
            + Self::chrono(self.config.call_timeout) * 2
            + chrono::Duration::seconds(5)
    }

    /// Gives back the nights held for a move that will not happen (none if none are).
    async fn release(
        &self,
        caller: &Caller,
        reservation_id: ReservationId,
        new_stay: StayDates,
    ) -> Result<(), CommandError> {
        self.commands
            .release_date_change(caller, reservation_id, new_stay)
            .await?;
        Ok(())
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
