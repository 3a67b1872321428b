//! `loadgen`: drives the real HTTP API with concurrent keep-alive clients and checks the
//! booking invariant in PostgreSQL afterwards.
//!
//! ```sh
//! loadgen setup --url http://127.0.0.1:8080 --admin-token admin-secret --start-date 2027-01-10
//! loadgen run hot --url http://127.0.0.1:8080 --token web-secret --clients 64 --seconds 10 \
//!     --start-date 2027-01-10 --database-url postgres://postgres@127.0.0.1/reservations
//! ```
//!
//! `loadgen ari` sends a year of ARI as bulk requests and reports the time and the events
//! written.
//!
//! `scripts/bench.sh` runs every scenario, the raw-SQL baseline and the strategy sweep in
//! one go; see docs/benchmarks.md.

// glibc's malloc was 7% of the load generator's CPU under load (perf: _int_malloc,
// malloc_consolidate, unlink_chunk); mimalloc keeps per-thread free lists.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;

use anyhow::Context;
use chrono::{Days, NaiveDate, Utc};
use clap::{Parser, Subcommand, ValueEnum};

mod ari;
mod invariant;
mod plans;
mod prom;
mod report;
mod run;
mod setup;
mod stats;
mod storage;

#[derive(Parser)]
#[command(
    name = "loadgen",
    about = "HTTP load generator for the reservations API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the benchmark catalog (hotels, room types, inventory) through the admin API.
    Setup(SetupArgs),
    /// Run one scenario for a fixed time, then check the invariant in the database.
    Run(RunArgs),
    /// Create hotels, room types and rate plans, then send a year (or `--nights`) of
    /// inventory, plan rates and weekend restrictions for every room type as bulk ARI
    /// requests, as few as the limits allow; report the time, requests, nights and the
    /// events written.
    Ari(AriArgs),
    /// Print the final table of a bench run: each figure, its ratio to the baseline and
    /// whether its target is met. Exits with status 1 when a run broke the invariant.
    Report(ReportArgs),
    /// What the database holds, per table, and per hold in the log (and the WAL written
    /// since a position, per hold).
    Storage(storage::StorageArgs),
}

/// The shape of the benchmark catalog; `setup` and `run` must be given the same one.
#[derive(clap::Args, Clone, Debug)]
pub struct Catalog {
    /// Hotels `--first-hotel` .. `--first-hotel + N - 1`.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    pub hotels: i64,
    /// Room types 1..=N of every hotel.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(i64).range(1..=100))]
    pub room_types: i64,
    /// Nights of inventory from the start date (at least 3: stays are 3 nights).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(3..=730))]
    pub nights: u64,
    /// First night of the inventory (default: 30 days after today, UTC).
    #[arg(long)]
    pub start_date: Option<NaiveDate>,
    /// Id of the first hotel, so catalogs of different shapes share one server.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i64).range(1..=1_000_000_000_000))]
    pub first_hotel: i64,
}

impl Catalog {
    pub fn first_night(&self) -> anyhow::Result<NaiveDate> {
        match self.start_date {
            Some(date) => Ok(date),
            None => Utc::now()
                .date_naive()
                .checked_add_days(Days::new(30))
                .context("date out of range"),
        }
    }

    pub fn last_hotel(&self) -> i64 {
        self.first_hotel + self.hotels - 1
    }

    /// Offset of the hot stay's first night: the 11th night, like the baseline's
    /// flash sale, or the last possible one in a shorter range.
    pub fn hot_offset(&self) -> u64 {
        10.min(self.nights - run::STAY_NIGHTS)
    }
}

#[derive(clap::Args)]
pub struct SetupArgs {
    /// Base URL of the server.
    #[arg(long, env = "LOADGEN_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A token with the admin role.
    #[arg(long, env = "LOADGEN_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: String,
    #[command(flatten)]
    pub catalog: Catalog,
    /// Rooms of every room type on every night.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(i64).range(0..=1_000_000))]
    pub rooms: i64,
    /// Rooms of the hot room type (hotel 1, room type 1); default: as --rooms.
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..=1_000_000))]
    pub hot_rooms: Option<i64>,
    /// Nightly rate in cents.
    #[arg(long, default_value_t = 10_000)]
    pub rate_cents: i64,
    /// Requests in flight at once (one hotel each).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub concurrency: u32,
    /// Afterwards, wait up to this long for the availability read model to catch up
    /// (0: do not wait).
    #[arg(long, default_value_t = 900)]
    pub wait_seconds: u64,
    /// Give every hotel the three rate plans (see `plans.rs`) and set inventory, plan 1's
    /// rate and these restrictions through one bulk ARI request a hotel, instead of one
    /// inventory PUT a room type.
    #[arg(long, value_enum)]
    pub plans: Option<plans::PlanSet>,
    /// Every hotel in this city (default: "Benchville {hotel % 50}").
    #[arg(long)]
    pub city: Option<String>,
    /// Plan 1's own rate on every night, in cents (with `--plans`).
    #[arg(long, default_value_t = 15_000)]
    pub plan_rate_cents: i64,
}

#[derive(clap::Args)]
pub struct AriArgs {
    /// Base URL of the server.
    #[arg(long, env = "LOADGEN_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A token with the admin role.
    #[arg(long, env = "LOADGEN_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: String,
    /// The hotels, room types and nights to set (e.g. `--hotels 20 --room-types 5
    /// --nights 365 --first-hotel 3000001`).
    #[command(flatten)]
    pub catalog: Catalog,
    /// Rooms of every room type on every night.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(0..=1_000_000))]
    pub rooms: i64,
    /// Base rate in cents.
    #[arg(long, default_value_t = 10_000)]
    pub rate_cents: i64,
    /// Plan 1's own rate in cents.
    #[arg(long, default_value_t = 15_000)]
    pub plan_rate_cents: i64,
    /// Hotels whose requests are in flight at once (a hotel's requests go one after
    /// the other).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,
    /// PostgreSQL of the server: count the events the requests wrote.
    #[arg(long, env = "LOADGEN_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Afterwards, wait up to this long for every projection to apply the events, and
    /// report how long that took (0: do not wait).
    #[arg(long, default_value_t = 300)]
    pub wait_seconds: u64,
    /// Print the run as one JSON object (as well as the table).
    #[arg(long)]
    pub json: bool,
    /// Append the run's JSON object to this file (JSON lines).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A label stored with the run.
    #[arg(long)]
    pub label: Option<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// 3-night holds on random hotels, room types and dates.
    Spread,
    /// Every client holds the same 3 nights of hotel 1, room type 1.
    Hot,
    /// Availability look-ups for random 3-night stays.
    Reads,
    /// Reads and spread holds, 400 to 1 (at random).
    Mixed,
    /// Spread holds naming a rate plan (`--rate-plan`, a derived one) with `--guests`,
    /// on a catalog set up with `--plans`; every total is checked against the plan's
    /// price.
    SpreadPlans,
    /// City searches (`GET /v1/availability?city=...`) for random 3-night stays.
    Search,
    /// City searches and holds in the searched city, `--reads-per-hold` to 1 (at
    /// random): holds naming `--rate-plan` with `--guests`, as `spread-plans`, on the
    /// searched catalog, so searches meet nights that bookings keep changing.
    SearchBooking,
    /// A month (31 nights) of a random hotel's inventory calendar, as the staff
    /// console polls it (`--token` of the admin or auditor role).
    Calendar,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Spread => "spread",
            Scenario::Hot => "hot",
            Scenario::Reads => "reads",
            Scenario::Mixed => "mixed",
            Scenario::SpreadPlans => "spread-plans",
            Scenario::Search => "search",
            Scenario::SearchBooking => "search-booking",
            Scenario::Calendar => "calendar",
        }
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    pub scenario: Scenario,
    /// Base URL of the server.
    #[arg(long, env = "LOADGEN_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A token with the channel role (the admin or auditor role for `calendar`).
    #[arg(long, env = "LOADGEN_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Concurrent clients, each with its own keep-alive connection.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub clients: u32,
    /// Measured time.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Time before the measurement starts (requests are sent, not recorded; holds
    /// acknowledged then are still checked).
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// PostgreSQL of the server: check the invariant there at the end.
    #[arg(long, env = "LOADGEN_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Print the run as one JSON object (as well as the table).
    #[arg(long)]
    pub json: bool,
    /// Append the run's JSON object to this file (JSON lines).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A label stored with the run, e.g. the server's write strategy.
    #[arg(long)]
    pub label: Option<String>,
    /// Reads per hold in the mixed scenario (searches per hold in search-booking).
    #[arg(long, default_value_t = 400)]
    pub reads_per_hold: u32,
    /// Per-request timeout in milliseconds (counted as `timeout`).
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// The plan `spread-plans` holds name.
    #[arg(long, default_value_t = plans::HOLD_PLAN)]
    pub rate_plan: i64,
    /// Guests per room of `spread-plans` holds and of searches.
    #[arg(long, default_value_t = 2)]
    pub guests: i64,
    /// Plan 1's rate the catalog was set up with (`setup --plan-rate-cents`): holds'
    /// and offers' totals are checked against it.
    #[arg(long, default_value_t = 15_000)]
    pub plan_rate_cents: i64,
    /// The city searched.
    #[arg(long, default_value = "Searchville")]
    pub city: String,
    /// Hotels a search asks for (`limit`).
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    /// `spread`: hold at this many hotels at a time, a window that moves on by as many
    /// hotels every second (0: every hotel of the catalog at once). A chain's bookings
    /// are not spread evenly over its hotels at every moment, and a few hotels at a
    /// time let group commit batch their holds: `scale.sh` grows its history this way.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..=1_000_000))]
    pub hotel_window: i64,
    #[command(flatten)]
    pub catalog: Catalog,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// JSON lines of the scenario runs (spread, hot, reads, mixed, spread-plans, search)
    /// and of the ARI year (`loadgen ari --out`).
    #[arg(long)]
    pub main: PathBuf,
    /// JSON lines of the hot strategy sweep.
    #[arg(long)]
    pub sweep: Option<PathBuf>,
    /// JSON lines with the baseline figures and the server's peak memory.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    match cli.command {
        Command::Setup(args) => runtime.block_on(setup::setup(args)),
        Command::Ari(args) => runtime.block_on(ari::ari(args)),
        Command::Storage(args) => runtime.block_on(storage::storage(args)),
        Command::Run(args) => {
            let ok = runtime.block_on(run::run(args))?;
            if !ok {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Report(args) => {
            let ok = report::report(&args)?;
            if !ok {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}
