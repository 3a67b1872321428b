//! The read side: projections that follow the event log durably.
//!
//! - [`log`]: reading the log in commit order without ever skipping an event;
//! - [`tail`]: one read of the log's newest events for all the runners of a process;
//! - [`runner`]: checkpoints, one active runner per projection, wake-ups, retries, lag
//!   metrics, and rebuilding a projection into a new generation while the old serves;
//! - [`catch_up`](mod@catch_up): bringing a projection up to date once, on demand;
//! - [`availability`]: remaining rooms and rates per night in Redis, for availability
//!   searches (never for granting a hold);
//! - [`analytics`]: the reservations view and daily occupancy and revenue (PostgreSQL);
//! - [`audit`]: the hash-chained, append-only audit log and its verification;
//! - [`webhooks`]: the partner deliveries made from the log, one per matching
//!   subscription and event (sent by the server's webhook sender);
//! - [`feed`]: the public shape of one recorded event (the event feed's item, the
//!   relay's message body, a webhook's data).

pub mod analytics;
pub mod audit;
pub mod availability;
pub mod catch_up;
pub mod feed;
pub mod log;
pub mod redis_conn;
pub mod runner;
pub mod tail;
pub mod webhooks;

pub use catch_up::catch_up;
pub use log::{Checkpoint, StoredEvent};
pub use runner::{rebuild, run, run_sharing, Projection, RunnerConfig};
pub use tail::Tail;
