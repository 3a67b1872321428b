//! `reservations`: the server binary.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "reservations",
    version,
    about = "Event-sourced hotel reservation platform"
)]
struct Cli {
    /// PostgreSQL URL; the database is created and migrated if needed.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://localhost/reservations",
        global = true
    )]
    database_url: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the database if missing and apply every migration.
    Migrate,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Migrate => {
            let pool = reservations::db::connect_and_migrate(&cli.database_url, 2).await?;
            pool.close().await;
            tracing::info!("database ready");
        }
    }
    Ok(())
}
