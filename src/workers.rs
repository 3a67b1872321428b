//! Background workers the server runs beside the API, each a task that stops when the
//! shutdown signal turns true.

use projections::audit::AuditLog;
use projections::RunnerConfig;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Follows the event log into the audit log. Safe to run in every server process: the
/// runner's leadership lock lets one of them write, the others stand by.
pub fn spawn_audit_runner(pool: PgPool, shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(projections::run(
        pool,
        AuditLog::new(),
        RunnerConfig::default(),
        shutdown,
    ))
}
