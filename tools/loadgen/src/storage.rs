//! `loadgen storage`: what a database holds, per table (heap, TOAST and indexes), and
//! what that is per hold (a `ReservationHeld` in the log) — the figure the storage diet
//! is judged by. With `--since FILE` (this command's `--json` of before a run), the
//! growth of each table since, per hold made since: what the run's holds cost, without
//! the catalog. With `--wal-since LSN` (`SELECT pg_current_wal_lsn()` before the run),
//! the WAL written since, per hold made since.

use anyhow::Context;
use serde::Serialize;
use sqlx::postgres::PgPoolOptions;

#[derive(clap::Args)]
pub struct StorageArgs {
    /// The database to measure.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: String,
    /// A WAL position taken before the run (`pg_current_wal_lsn()`).
    #[arg(long)]
    pub wal_since: Option<String>,
    /// A report of before the run (`--json` of an earlier call): report the growth since.
    #[arg(long)]
    pub since: Option<std::path::PathBuf>,
    /// Write the report (of the whole database, not the growth) as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct TableSize {
    pub table: String,
    pub rows: i64,
    pub heap_bytes: i64,
    pub toast_bytes: i64,
    pub index_bytes: i64,
    pub total_bytes: i64,
}

#[derive(Debug, Serialize, serde::Deserialize)]
pub struct StorageReport {
    pub events: i64,
    pub holds: i64,
    pub total_bytes: i64,
    pub bytes_per_hold: Option<f64>,
    pub wal_bytes: Option<i64>,
    pub wal_bytes_per_hold: Option<f64>,
    pub tables: Vec<TableSize>,
}

pub async fn storage(args: StorageArgs) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&args.database_url)
        .await
        .context("connecting to PostgreSQL")?;
    // Rows from the statistics collector's live-tuple counts: an ANALYZE here would
    // change the plans of the run that follows (a table analyzed while nearly empty is
    // planned as tiny; see docs/scaling.md), so the measurement must not run one.
    let tables: Vec<TableSize> = sqlx::query_as(
        "SELECT c.relname::text AS table,
                coalesce(s.n_live_tup, 0)::bigint AS rows,
                pg_relation_size(c.oid) AS heap_bytes,
                coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) AS toast_bytes,
                pg_indexes_size(c.oid) AS index_bytes,
                pg_total_relation_size(c.oid) AS total_bytes
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
          WHERE c.relkind IN ('r', 'p') AND n.nspname IN ('public', 'privacy')
          ORDER BY pg_total_relation_size(c.oid) DESC",
    )
    .fetch_all(&pool)
    .await?;
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&pool)
        .await?;
    let holds: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE aggregate_type = 'reservation'
            AND event_type = 'ReservationHeld'",
    )
    .fetch_one(&pool)
    .await?;
    let total_bytes: i64 = tables.iter().map(|t| t.total_bytes).sum();
    let wal_bytes: Option<i64> = match &args.wal_since {
        Some(lsn) => Some(
            sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint")
                .bind(lsn)
                .fetch_one(&pool)
                .await?,
        ),
        None => None,
    };
    let per = |bytes: i64, holds: i64| (holds > 0).then(|| bytes as f64 / holds as f64);
    let report = StorageReport {
        events,
        holds,
        total_bytes,
        bytes_per_hold: per(total_bytes, holds),
        wal_bytes,
        wal_bytes_per_hold: wal_bytes.and_then(|w| per(w, holds)),
        tables,
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let report = match &args.since {
        Some(path) => {
            let before: StorageReport = serde_json::from_slice(
                &std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
            )?;
            growth(&report, &before)
        }
        None => report,
    };
    print(&report);
    pool.close().await;
    Ok(())
}

/// What grew from `before` to `after`: tables, events and holds as differences, so the
/// per-hold figures are those of the holds made in between.
fn growth(after: &StorageReport, before: &StorageReport) -> StorageReport {
    let holds = after.holds - before.holds;
    let tables: Vec<TableSize> = after
        .tables
        .iter()
        .map(|t| {
            let was = before.tables.iter().find(|b| b.table == t.table);
            let minus = |now: i64, of: fn(&TableSize) -> i64| now - was.map_or(0, of);
            TableSize {
                table: t.table.clone(),
                rows: minus(t.rows, |b| b.rows),
                heap_bytes: minus(t.heap_bytes, |b| b.heap_bytes),
                toast_bytes: minus(t.toast_bytes, |b| b.toast_bytes),
                index_bytes: minus(t.index_bytes, |b| b.index_bytes),
                total_bytes: minus(t.total_bytes, |b| b.total_bytes),
            }
        })
        .collect();
    let total_bytes = tables.iter().map(|t| t.total_bytes).sum();
    let per = |bytes: i64| (holds > 0).then(|| bytes as f64 / holds as f64);
    StorageReport {
        events: after.events - before.events,
        holds,
        total_bytes,
        bytes_per_hold: per(total_bytes),
        wal_bytes: after.wal_bytes,
        wal_bytes_per_hold: after.wal_bytes.and_then(per),
        tables,
    }
}

fn print(report: &StorageReport) {
    let per_hold = |bytes: i64| {
        if report.holds > 0 {
            format!("{:>9.0}", bytes as f64 / report.holds as f64)
        } else {
            format!("{:>9}", "-")
        }
    };
    println!(
        "{:<28} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9}",
        "table", "rows", "heap", "toast", "indexes", "total", "per hold"
    );
    for t in report
        .tables
        .iter()
        .filter(|t| t.total_bytes.abs() > 64 * 1024)
    {
        println!(
            "{:<28} {:>11} {:>11} {:>11} {:>11} {:>11} {}",
            t.table,
            t.rows,
            t.heap_bytes,
            t.toast_bytes,
            t.index_bytes,
            t.total_bytes,
            per_hold(t.total_bytes)
        );
    }
    println!(
        "{} events, {} holds: {} bytes, {} per hold{}",
        report.events,
        report.holds,
        report.total_bytes,
        report
            .bytes_per_hold
            .map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
        match (report.wal_bytes, report.wal_bytes_per_hold) {
            (Some(w), Some(p)) => format!("; WAL {w} bytes, {p:.0} per hold"),
            _ => String::new(),
        }
    );
}
