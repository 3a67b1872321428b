//! `reservations`: the server binary and its administrative subcommands.

// glibc's malloc showed in the server's profile under load; mimalloc keeps per-thread
// free lists (see `allocator-and-planning` in docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use app::commands::CommandService;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use reservations::startup::{Application, Settings};
use reservations::workers::{self, ProjectionName};
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
    Serve(Box<Settings>),
    /// Create the database if missing and apply every migration.
    Migrate {
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
    },
    /// Load four demo hotels with room types and 365 nights of inventory and rates.
    SeedDemo {
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
    },
    /// Inspect and rebuild the read-side projections.
    #[command(subcommand)]
    Projections(ProjectionsCommand),
    /// The audit log.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Reports from the read side.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Consumers of the JetStream stream the relay publishes (NATS_URL).
    #[command(subcommand)]
    Jetstream(JetstreamCommand),
    /// Guests' personal data (docs/privacy.md).
    #[command(subcommand)]
    Guests(GuestsCommand),
    /// Staff accounts (the console's people).
    #[command(subcommand)]
    Staff(StaffCommand),
}

#[derive(Subcommand)]
enum StaffCommand {
    /// Create a staff account; its password is read from STAFF_PASSWORD, else from the
    /// first line of standard input (never from the command line, which others can see).
    Create {
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: String,
        /// admin, revenue, front_desk or auditor.
        #[arg(long)]
        role: String,
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
    },
}

#[derive(Subcommand)]
enum GuestsCommand {
    /// Erase every guest whose stays all ended more than YEARS years ago (their keys
    /// destroyed, their reservations recording GuestErased), as `POST
    /// /v1/guests/erase` erases one. Without --apply, only lists how many there are.
    EraseEnded {
        #[arg(long)]
        years: u32,
        #[arg(long)]
        apply: bool,
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
    },
}

#[derive(Subcommand)]
enum JetstreamCommand {
    /// Rebuild the occupancy projection from the JetStream stream alone (every
    /// message it holds now) into DATABASE_URL, a database of its own (created and
    /// migrated if missing; its occupancy tables are replaced).
    Occupancy {
        #[arg(long, env = "NATS_URL", default_value = "nats://127.0.0.1:4222")]
        nats_url: String,
        #[arg(long, env = "NATS_STREAM", default_value = "RESERVATION_EVENTS")]
        nats_stream: String,
        #[arg(
            long,
            env = "NATS_SUBJECT_PREFIX",
            default_value = "reservations.events"
        )]
        nats_subject_prefix: String,
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/occupancy_from_jetstream"
        )]
        database_url: String,
    },
}

#[derive(Subcommand)]
enum ReportCommand {
    /// A hotel's no-show rate per room type over a range of arrival dates, and the
    /// overbooking allowance it suggests: the largest whose probability of walking a
    /// guest stays at or under --risk (see docs/api.md, the no-show report).
    NoShows {
        #[arg(long)]
        hotel: i64,
        /// First arrival date counted.
        #[arg(long)]
        from: chrono::NaiveDate,
        /// The arrival date after the last one counted.
        #[arg(long)]
        to: chrono::NaiveDate,
        /// The largest probability of walking a guest accepted.
        #[arg(long, default_value_t = 0.05)]
        risk: f64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
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
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
        /// How long to wait for a running server's audit runner to catch up.
        #[arg(long, default_value_t = 60)]
        wait_seconds: u64,
    },
    /// A hotel's availability for a stay as the event log knew it at a past moment:
    /// prints the JSON `GET /v1/hotels/{id}/availability?as_known_at=` answers.
    At {
        #[arg(long)]
        hotel: i64,
        /// The moment, RFC 3339 (`2027-05-02T10:00:00Z`).
        #[arg(long)]
        at: chrono::DateTime<chrono::Utc>,
        /// The stay's first night (YYYY-MM-DD).
        #[arg(long)]
        start_date: chrono::NaiveDate,
        /// Its check-out day.
        #[arg(long)]
        end_date: chrono::NaiveDate,
        #[arg(long, default_value_t = 1)]
        rooms: i64,
        #[arg(long, default_value_t = 1)]
        guests: i64,
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
    },
}

#[derive(Subcommand)]
enum ProjectionsCommand {
    /// Rebuild NAME from position zero into a new generation while the current one keeps
    /// serving, then switch to it.
    Rebuild {
        /// The projection: availability, reservations_view or occupancy.
        name: ProjectionName,
        /// Redis holding the availability model.
        #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
        redis_url: String,
        /// Events applied per transaction.
        #[arg(long, default_value_t = 500,
              value_parser = clap::value_parser!(i64).range(1..=100_000))]
        batch_size: i64,
        /// PostgreSQL holding the event log and the projections.
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
    },
    /// List every projection's generation, checkpoint and lag.
    Status {
        /// PostgreSQL holding the event log and the projections.
        #[arg(
            long,
            env = "DATABASE_URL",
            default_value = "postgres://postgres@127.0.0.1:5432/reservations"
        )]
        database_url: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    api::telemetry::init_tracing(cli.log_json);
    match cli.command {
        Command::Serve(settings) => {
            let app = Application::build((*settings).clone()).await?;
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
            let pool = store::db::connect_and_migrate(&database_url, 2).await?;
            pool.close().await;
            tracing::info!("database ready");
        }
        Command::SeedDemo { database_url } => {
            let pool = store::db::connect_and_migrate(&database_url, 4).await?;
            let settings = Settings::for_database(&database_url);
            let commands = CommandService::new(pool.clone(), settings.write_config());
            let nights = app::demo::seed(&commands)
                .await
                .context("loading the demo catalog")?;
            pool.close().await;
            println!("demo catalog loaded: hotels 812 (Lisbon), 813 (Porto), 901 (Paris), 950 (Zurich); {nights} room-nights");
        }
        Command::Projections(command) => projections_command(command).await?,
        Command::Staff(StaffCommand::Create {
            email,
            name,
            role,
            database_url,
        }) => {
            let role = app::staff::StaffRole::parse(&role).with_context(|| {
                format!("--role {role:?}: must be admin, revenue, front_desk or auditor")
            })?;
            let password = match std::env::var("STAFF_PASSWORD") {
                Ok(password) => password,
                Err(_) => {
                    let mut line = String::new();
                    std::io::stdin()
                        .read_line(&mut line)
                        .context("reading the password from standard input")?;
                    line.trim_end_matches(['\r', '\n']).to_owned()
                }
            };
            let pool = store::db::connect_and_migrate(&database_url, 2).await?;
            let staff = app::staff::create(&pool, &email, &name, role, &password).await?;
            pool.close().await;
            println!(
                "staff {} created: {} <{}>, {}",
                staff.staff_id,
                staff.name,
                staff.email,
                staff.role.as_str()
            );
        }
        Command::Guests(GuestsCommand::EraseEnded {
            years,
            apply,
            database_url,
        }) => {
            let pool = store::db::connect_and_migrate(&database_url, 4).await?;
            let settings = Settings::for_database(&database_url);
            let commands = CommandService::new(pool.clone(), settings.write_config());
            let today = chrono::Utc::now().date_naive();
            let cutoff = today
                .checked_sub_months(chrono::Months::new(years.saturating_mul(12)))
                .context("the cutoff date")?;
            if apply {
                let caller = app::commands::Caller::Staff("retention".to_owned());
                let done = app::commands::erase::erase_stays_ended_before(
                    &commands, None, &caller, cutoff,
                )
                .await?;
                let reservations: usize = done.iter().map(|e| e.reservations).sum();
                println!(
                    "erased {} guests whose stays ended before {cutoff} ({reservations} reservations)",
                    done.len()
                );
            } else {
                let guests =
                    app::commands::erase::guests_whose_stays_ended_before(&commands, cutoff)
                        .await?;
                println!(
                    "{} guests' stays all ended before {cutoff}; run with --apply to erase them",
                    guests.len()
                );
            }
            pool.close().await;
        }
        Command::Report(command) => report_command(command).await?,
        Command::Jetstream(JetstreamCommand::Occupancy {
            nats_url,
            nats_stream,
            nats_subject_prefix,
            database_url,
        }) => {
            let target = app::relay::RelayTarget::parse(&nats_stream, &nats_subject_prefix)
                .map_err(anyhow::Error::msg)?;
            let pool = store::db::connect_and_migrate(&database_url, 2).await?;
            let context = app::relay::connect(&nats_url).await?;
            let consumed = app::relay::occupancy_from_stream(&context, &target, &pool).await?;
            pool.close().await;
            println!(
                "occupancy rebuilt from {} messages of {nats_stream} (last log position {})",
                consumed.messages,
                consumed
                    .last_position
                    .map_or_else(|| "none".to_owned(), |p| p.to_string())
            );
        }
        Command::Audit {
            command:
                AuditCommand::At {
                    hotel,
                    at,
                    start_date,
                    end_date,
                    rooms,
                    guests,
                    database_url,
                },
        } => {
            audit_at(
                hotel,
                at,
                (start_date, end_date),
                (rooms, guests),
                &database_url,
            )
            .await?
        }
        Command::Audit {
            command:
                AuditCommand::Verify {
                    database_url,
                    wait_seconds,
                },
        } => {
            store::db::create_database_if_missing(&database_url).await?;
            // Verify's reads are long by design (each streams a whole table): without
            // statement logging, sqlx does not warn about every one as slow.
            let options = PgConnectOptions::from_str(&database_url)?.disable_statement_logging();
            // Verify reads through six connections at once, on one snapshot.
            let pool = PgPoolOptions::new()
                .max_connections(6)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(options)
                .await
                .context("connecting to PostgreSQL")?;
            store::db::MIGRATOR.run(&pool).await?;
            let progress = std::sync::Arc::new(projections::audit::VerifyProgress::default());
            let bar = events_bar("verifying");
            // The bar follows the verify from beside it: the checks only count.
            let ticker = {
                let (bar, progress) = (bar.clone(), std::sync::Arc::clone(&progress));
                tokio::spawn(async move {
                    loop {
                        bar.set_length(progress.total());
                        bar.set_position(progress.done());
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                })
            };
            let started = std::time::Instant::now();
            let verified = projections::audit::catch_up_and_verify_with(
                &pool,
                Duration::from_secs(wait_seconds),
                std::sync::Arc::clone(&progress),
            )
            .await;
            ticker.abort();
            pool.close().await;
            let report = match verified {
                Ok(report) => report,
                Err(e) => {
                    bar.abandon_with_message("verify failed");
                    return Err(e.context("verifying the audit log"));
                }
            };
            let seconds = started.elapsed().as_secs_f64();
            bar.finish_and_clear();
            eprintln!(
                "verified {} events in {seconds:.1} s: {:.0} events/s",
                report.events_checked,
                report.events_checked as f64 / seconds.max(1e-9)
            );
            println!("{}", serde_json::to_string_pretty(&report)?);
            if !report.ok {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

/// `reservations audit at`: the availability answer of the log at `at`, as JSON.
async fn audit_at(
    hotel: i64,
    at: chrono::DateTime<chrono::Utc>,
    (start_date, end_date): (chrono::NaiveDate, chrono::NaiveDate),
    (rooms, guests): (i64, i64),
    database_url: &str,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        at <= chrono::Utc::now(),
        "--at is in the future: the log knows only the past"
    );
    let hotel_id =
        aggregates::HotelId::parse(hotel).map_err(|e| anyhow::anyhow!("--hotel: {}", e.message))?;
    let stay = aggregates::StayDates::parse(start_date, end_date)
        .map_err(|e| anyhow::anyhow!("--start-date/--end-date: {}", e.message))?;
    let limits = aggregates::BookingLimits::default();
    limits
        .check_nights(&stay)
        .map_err(|e| anyhow::anyhow!("--end-date: {e}"))?;
    let query = app::queries::StayQuery {
        stay,
        rooms: limits
            .rooms(rooms)
            .map_err(|e| anyhow::anyhow!("--rooms: {e}"))?,
        guests: aggregates::GuestCount::parse(guests)
            .map_err(|e| anyhow::anyhow!("--guests: {}", e.message))?,
        limits,
    };
    let pool = store::db::connect_and_migrate(database_url, 2).await?;
    let queries = app::queries::Queries::new(
        pool.clone(),
        None,
        std::sync::Arc::new(app::clock::SystemClock),
    );
    let answer = queries
        .availability_as_known_at(hotel_id, &query, at)
        .await
        .map_err(|e| anyhow::anyhow!("reading the log: {e}"))?
        .ok_or_else(|| anyhow::anyhow!("hotel {hotel} did not exist at {at}"))?;
    let out = api::catalog::availability_out(hotel_id, &query, answer, Some(at))
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    pool.close().await;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

async fn report_command(command: ReportCommand) -> anyhow::Result<()> {
    let ReportCommand::NoShows {
        hotel,
        from,
        to,
        risk,
        json,
        database_url,
    } = command;
    anyhow::ensure!(risk > 0.0 && risk < 1.0, "--risk must be between 0 and 1");
    let hotel_id =
        aggregates::HotelId::parse(hotel).map_err(|e| anyhow::anyhow!("--hotel: {}", e.message))?;
    let range = aggregates::StayDates::parse(from, to)
        .map_err(|e| anyhow::anyhow!("--from/--to: {}", e.message))?;
    let pool = store::db::connect_and_migrate(&database_url, 2).await?;
    let queries = app::queries::Queries::new(
        pool.clone(),
        None,
        std::sync::Arc::new(app::clock::SystemClock),
    );
    let read = queries
        .stays(hotel_id, &range)
        .await
        .map_err(|e| anyhow::anyhow!("reading the stays: {e}"))?;
    pool.close().await;
    let Some(read) = read else {
        anyhow::bail!("no hotel {hotel}");
    };
    let report = read.no_show_report(risk);
    if json {
        let rows: Vec<serde_json::Value> = report
            .iter()
            .map(|r| {
                serde_json::json!({
                    "room_type_id": r.room_type_id, "name": r.name, "due": r.due,
                    "no_shows": r.no_shows, "no_show_rate": r.no_show_rate,
                    "no_show_rate_lower_bound": r.suggestion.rate,
                    "capacity": r.capacity, "current_allowance": r.current_allowance,
                    "suggested_allowance": r.suggestion.allowance,
                    "walk_probability": r.suggestion.walk_probability,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "hotel_id": hotel, "start_date": from, "end_date": to, "risk": risk,
                "as_of": read.as_of, "room_types": rows,
            }))?
        );
        return Ok(());
    }
    println!(
        "hotel {hotel}, arrivals {from} to {to} (exclusive), risk of walking a guest {:.1}%, as of {}",
        risk * 100.0,
        read.as_of
            .map_or_else(|| "never".to_owned(), |t| t.to_rfc3339())
    );
    println!(
        "{:<6} {:<20} {:>6} {:>8} {:>7} {:>9} {:>8} {:>8} {:>9} {:>7}",
        "type",
        "name",
        "due",
        "no-shows",
        "rate",
        "rate (lb)",
        "rooms",
        "allowed",
        "suggested",
        "P(walk)"
    );
    for r in &report {
        println!(
            "{:<6} {:<20} {:>6} {:>8} {:>7} {:>8.2}% {:>8} {:>8} {:>9} {:>6.2}%",
            r.room_type_id,
            r.name,
            r.due,
            r.no_shows,
            r.no_show_rate
                .map_or_else(|| "-".to_owned(), |p| format!("{:.2}%", p * 100.0)),
            r.suggestion.rate * 100.0,
            r.capacity,
            r.current_allowance,
            r.suggestion.allowance,
            r.suggestion.walk_probability * 100.0,
        );
    }
    Ok(())
}

/// A progress bar of events walked (its length set as the work learns it), labelled
/// `message`: a rebuild's and a verify's.
fn events_bar(message: impl Into<std::borrow::Cow<'static, str>>) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} events ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(message);
    bar
}

async fn projections_command(command: ProjectionsCommand) -> anyhow::Result<()> {
    match command {
        ProjectionsCommand::Rebuild {
            name,
            redis_url,
            batch_size,
            database_url,
        } => {
            let pool = store::db::connect_and_migrate(&database_url, 4).await?;
            let redis = Some(workers::RedisModel {
                redis: projections::availability::connect(&redis_url)?,
                keys: projections::availability::Keys::for_database(
                    &reservations::startup::database_name(&database_url)?,
                ),
            });
            let bar = events_bar(format!("rebuilding {name}"));
            let rebuilt = workers::rebuild(&pool, redis, name, batch_size, |applied, total| {
                // The log grows while the rebuild runs, so the total is re-read each time.
                bar.set_length(total);
                bar.set_position(applied);
            })
            .await;
            pool.close().await;
            match rebuilt {
                Ok(generation) => {
                    bar.finish_with_message(format!("rebuilt {name}"));
                    println!("{name}: generation {generation} is now served");
                }
                Err(e) => {
                    bar.abandon_with_message(format!("rebuilding {name} failed"));
                    return Err(e.context(format!("rebuilding {name}")));
                }
            }
        }
        ProjectionsCommand::Status { database_url } => {
            let pool = store::db::connect_and_migrate(&database_url, 2).await?;
            let statuses = workers::status(&pool).await;
            pool.close().await;
            println!(
                "{:<24} {:>10} {:>14} {:>10} {:>10}  updated",
                "projection", "generation", "position", "behind", "lag (s)"
            );
            for s in statuses? {
                println!(
                    "{:<24} {:>10} {:>14} {:>10} {:>10.1}  {}",
                    s.name,
                    s.generation
                        .map_or_else(|| "-".to_owned(), |g| g.to_string()),
                    s.checkpoint.position,
                    s.behind,
                    s.lag_seconds,
                    s.updated_at
                        .map_or_else(|| "never run".to_owned(), |t| t.to_rfc3339()),
                );
            }
        }
    }
    Ok(())
}
