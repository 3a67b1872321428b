//! `reservations`: the server binary and its administrative subcommands.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use reservations::commands::CommandService;
use reservations::startup::{Application, Settings};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::ConnectOptions;

#[derive(Parser)]
#[command(
    name = "reservations",
    version,
    about = "Event-sourced hotel reservation platform"
)]
struct Cli {
    /// Log as JSON lines instead of text.
    #[arg(long, env = "LOG_JSON", global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (creates and migrates the database first).
    Serve(Settings),
    /// Create the database if missing and apply every migration.
    Migrate {
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://localhost/reservations"
        )]
        database_url: String,
    },
    /// Load three demo hotels with room types and 365 nights of inventory and rates.
    SeedDemo {
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://localhost/reservations"
        )]
        database_url: String,
    },
    /// The audit log.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Bring the audit log up to date, then check its hash chain, replay every stream
    /// against the invariants and compare the nights with room_nights. Prints the JSON
    /// report; exits with status 1 when anything is wrong.
    Verify {
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://localhost/reservations"
        )]
        database_url: String,
        /// How long to wait for a running server's audit runner to catch up.
        #[arg(long, default_value_t = 60)]
        wait_seconds: u64,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    reservations::telemetry::init_tracing(cli.log_json);
    match cli.command {
        Command::Serve(settings) => {
            let app = Application::build(settings.clone()).await?;
            if let Some(token) = app.generated_admin_token() {
                // Printed once, on purpose: there is no other way to learn it.
                println!("No API_TOKENS configured; generated admin token: {token}");
            }
            tracing::info!(
                address = %settings.listen_addr,
                port = app.port(),
                strategy = ?settings.strategy,
                "serving"
            );
            app.run_until_stopped().await?;
        }
        Command::Migrate { database_url } => {
            let pool = reservations::db::connect_and_migrate(&database_url, 2).await?;
            pool.close().await;
            tracing::info!("database ready");
        }
        Command::SeedDemo { database_url } => {
            let pool = reservations::db::connect_and_migrate(&database_url, 4).await?;
            let settings = Settings::for_database(&database_url);
            let commands = CommandService::new(pool.clone(), settings.write_config());
            let nights = reservations::demo::seed(&commands)
                .await
                .context("loading the demo catalog")?;
            pool.close().await;
            println!("demo catalog loaded: hotels 812 (Lisbon), 813 (Porto), 901 (Paris); {nights} room-nights");
        }
        Command::Audit {
            command:
                AuditCommand::Verify {
                    database_url,
                    wait_seconds,
                },
        } => {
            reservations::db::create_database_if_missing(&database_url).await?;
            // Verify's reads are long by design (each streams a whole table): without
            // statement logging, sqlx does not warn about every one as slow.
            let options = PgConnectOptions::from_str(&database_url)?.disable_statement_logging();
            // Verify reads through five connections at once, on one snapshot.
            let pool = PgPoolOptions::new()
                .max_connections(6)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(options)
                .await
                .context("connecting to PostgreSQL")?;
            reservations::db::MIGRATOR.run(&pool).await?;
            let report =
                projections::audit::catch_up_and_verify(&pool, Duration::from_secs(wait_seconds))
                    .await
                    .context("verifying the audit log")?;
            pool.close().await;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if !report.ok {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}
