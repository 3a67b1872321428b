//! The command API the HTTP layer calls: catalog, inventory and the reservation
//! lifecycle. Each method validates nothing the types have not already validated; it
//! runs the unit of work (load, decide, append in one transaction, see [`crate::write`])
//! with retries, stamps the current time and new ids into the commands, and keeps
//! idempotency records for the calls clients may retry.
//!
//! - [`catalog`]: hotels, room types and inventory (staff);
//! - [`lifecycle`]: hold, cancel, change dates, confirm, expire, and the one shape every
//!   command on an existing reservation takes;
//! - [`group`]: group commit, which decides the holds that queue meanwhile together in
//!   one transaction per lane.
//!
//! The dependency runs one way: commands use the write side; the write side knows
//! nothing of commands. Group commit's workers hold a narrow handle (the pool and the
//! configuration), not the service, so no reference cycle keeps either alive.

mod catalog;
pub mod group;
mod lifecycle;

use std::sync::Arc;

use aggregates::{BookingLimits, Rejection, Reservation};
use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;

use crate::clock::{Clock, SystemClock};
use crate::write::{RetryPolicy, Strategy};

pub use crate::view::{GuestView, ReservationView};
pub use catalog::{MAX_ARI_NIGHTS, MAX_ARI_UPDATES};
pub use lifecycle::{AfterDecision, HoldRequest, Loaded, ReservationCommand, StayAction};

/// The outcome stored for an idempotent request: what the first attempt answered.
pub type Outcome = Result<ReservationView, Rejection>;

/// How the write side behaves; every field has a production default.
#[derive(Debug, Clone, Copy)]
pub struct WriteConfig {
    pub strategy: Strategy,
    pub retry: RetryPolicy,
    pub hold_ttl: Duration,
    pub limits: BookingLimits,
    /// Most nights one inventory update may set (a year and a bit).
    pub max_inventory_nights: u32,
    /// Group commit: how many batches of holds may be in flight at once.
    pub group_lanes: usize,
}

impl Default for WriteConfig {
    fn default() -> Self {
        Self {
            strategy: Strategy::Group,
            retry: RetryPolicy::default(),
            hold_ttl: Duration::seconds(900),
            limits: BookingLimits::default(),
            max_inventory_nights: 800,
            group_lanes: group::DEFAULT_LANES,
        }
    }
}

/// Who is acting. A channel (a booking front-end) acts on its own reservations only;
/// staff act on any, and their cancellations count as the hotel's. The name is the
/// calling token's, recorded with every event the command appends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Channel(String),
    Staff(String),
}

impl Caller {
    pub fn name(&self) -> &str {
        match self {
            Caller::Channel(name) | Caller::Staff(name) => name,
        }
    }

    pub(crate) fn may_act_on(&self, reservation: &Reservation) -> bool {
        match self {
            Caller::Staff(_) => true,
            Caller::Channel(name) => reservation.details().is_some_and(|d| &d.channel == name),
        }
    }
}

#[derive(Clone)]
pub struct CommandService {
    pool: PgPool,
    config: WriteConfig,
    clock: Arc<dyn Clock>,
    group: Arc<group::GroupCommit>,
}

impl CommandService {
    pub fn new(pool: PgPool, config: WriteConfig) -> Self {
        Self::with_clock(pool, config, Arc::new(SystemClock))
    }

    pub fn with_clock(pool: PgPool, config: WriteConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            group: Arc::new(group::GroupCommit::new(pool.clone(), config)),
            pool,
            config,
            clock,
        }
    }

    pub fn config(&self) -> &WriteConfig {
        &self.config
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}
