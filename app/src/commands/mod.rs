//! The command API the HTTP layer calls: catalog, inventory and the reservation
//! lifecycle. Each method validates nothing the types have not already validated; it
//! runs the unit of work (load, decide, append in one transaction, see [`store::write`])
//! with retries, stamps the current time and new ids into the commands, and keeps
//! idempotency records for the calls clients may retry.
//!
//! - [`answers`]: what an idempotency record keeps of an answer, and how a retry gets it
//!   back;
//! - [`catalog`]: hotels, room types and inventory (staff);
//! - [`lifecycle`]: hold, cancel, change dates, confirm, expire, and the one shape every
//!   command on an existing reservation takes;
//! - [`references`]: the numbers behind new reservations' short references;
//! - [`shards`]: which hotels may share a transaction;
//! - [`group`]: group commit, which decides the holds that queue meanwhile together in
//!   one transaction per lane.
//!
//! The dependency runs one way: commands use the write side; the write side knows
//! nothing of commands. Group commit's workers hold a narrow handle (the pool and the
//! configuration), not the service, so no reference cycle keeps either alive.

pub mod answers;
pub mod blocks;
mod catalog;
pub mod erase;
pub mod group;
mod lifecycle;
pub mod references;
pub mod shards;
pub mod turnaways;

use std::sync::Arc;
use uuid::Uuid;

use aggregates::{BookingLimits, Rejection, Reservation};
use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::clock::{Clock, SystemClock};
use store::error::CommandError;
use store::privacy::Privacy;
use store::write::{RetryPolicy, Strategy};

pub use aggregates::booking::{HoldRequest, LineRequest};
pub use catalog::{MAX_ARI_NIGHTS, MAX_ARI_UPDATES};
pub use lifecycle::{AfterDecision, Loaded, ReservationCommand, StayAction};
pub use store::view::{GuestView, ReservationView};

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
    /// Most nights the bulk inventory commands (inventory ranges, bulk ARI, the
    /// horizon) may be writing at once, over all requests; more wait their turn. A
    /// night being written costs about 2 KB of the server's memory (its loaded state,
    /// events and SQL parameters), and PostgreSQL is saturated by a few such requests
    /// already, so beyond this admitting more only grows memory (docs/scaling.md,
    /// `bulk-memory`). A request larger than the budget runs alone.
    pub bulk_nights_in_flight: u32,
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
            bulk_nights_in_flight: 10_000,
        }
    }
}

/// Who is acting. A channel (a booking front-end) acts on its own reservations only;
/// staff act on any, and their cancellations count as the hotel's. The name (the
/// calling token's, a worker's, or the person's) is recorded with every event the
/// command appends, and so is a person's staff id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Channel(String),
    /// A staff token or one of the server's own workers, by name.
    Staff(String),
    /// A staff member signed in to the console.
    Person {
        name: String,
        staff_id: Uuid,
    },
}

impl Caller {
    pub fn name(&self) -> &str {
        match self {
            Caller::Channel(name) | Caller::Staff(name) | Caller::Person { name, .. } => name,
        }
    }

    /// The person acting, if one is.
    pub fn staff_id(&self) -> Option<Uuid> {
        match self {
            Caller::Person { staff_id, .. } => Some(*staff_id),
            Caller::Channel(_) | Caller::Staff(_) => None,
        }
    }

    pub(crate) fn may_act_on(&self, reservation: &Reservation) -> bool {
        match self {
            Caller::Staff(_) | Caller::Person { .. } => true,
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
    /// The guests' keys: the writer seals personal data with them.
    privacy: Privacy,
    /// Nights the bulk inventory commands may still start writing (see
    /// [`WriteConfig::bulk_nights_in_flight`]).
    bulk_nights: Arc<Semaphore>,
    /// This server's block of reference numbers for new reservations.
    references: references::ReferenceNumbers,
    /// Where refused holds are recorded (off the request path); `None` without a runtime.
    turnaways: Option<turnaways::TurnawayLog>,
}

impl CommandService {
    pub fn new(pool: PgPool, config: WriteConfig) -> Self {
        Self::with_clock(pool, config, Arc::new(SystemClock))
    }

    pub fn with_clock(pool: PgPool, config: WriteConfig, clock: Arc<dyn Clock>) -> Self {
        let privacy = Privacy::postgres(pool.clone());
        Self {
            group: Arc::new(group::GroupCommit::new(
                pool.clone(),
                config,
                privacy.clone(),
                Arc::new(shards::ShardMap::default()),
            )),
            privacy,
            bulk_nights: Arc::new(Semaphore::new(config.bulk_nights_in_flight.max(1) as usize)),
            references: references::ReferenceNumbers::default(),
            turnaways: turnaways::TurnawayLog::start(pool.clone()),
            pool,
            config,
            clock,
        }
    }

    /// The same service with group commit batching by `shards` (one shard unless
    /// given): see [`shards`].
    pub fn with_shards(mut self, shards: shards::ShardMap) -> Self {
        self.group = Arc::new(group::GroupCommit::new(
            self.pool.clone(),
            self.config,
            self.privacy.clone(),
            Arc::new(shards),
        ));
        self
    }

    pub fn config(&self) -> &WriteConfig {
        &self.config
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn privacy(&self) -> &Privacy {
        &self.privacy
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Waits until `nights` more nights may be written by a bulk command (all of the
    /// budget for a request larger than it); the room is given back when the returned
    /// permit is dropped. First come, first served: a large request is not overtaken
    /// for ever by small ones.
    async fn bulk_room(&self, nights: usize) -> Result<SemaphorePermit<'_>, CommandError> {
        let budget = self.config.bulk_nights_in_flight.max(1);
        let wanted = u32::try_from(nights).unwrap_or(u32::MAX).clamp(1, budget);
        let asked = std::time::Instant::now();
        let permit = self
            .bulk_nights
            .acquire_many(wanted)
            .await
            .map_err(|_| CommandError::Internal("the bulk write budget was closed".into()))?;
        metrics::histogram!("bulk_write_wait_seconds").record(asked.elapsed().as_secs_f64());
        Ok(permit)
    }
}
