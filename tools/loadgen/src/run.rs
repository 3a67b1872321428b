//! `loadgen run SCENARIO`: N clients, each a task with its own keep-alive connection,
//! send requests back to back until the deadline; then the figures, the server's
//! contention counters and the invariant check.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use chrono::{Days, NaiveDate, Utc};
use http_body_util::{BodyExt, Full};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use crate::invariant::{self, InvariantReport};
use crate::plans;
use crate::stats::{self, KindStats, KindSummary, Latency};
use crate::{prom, RunArgs, Scenario};

/// Every stay is 3 nights, as in the baseline.
pub const STAY_NIGHTS: u64 = 3;

struct Plan {
    scenario: Scenario,
    /// The server's `host:port`, from `--url`: where the clients connect, and their
    /// `Host` header.
    authority: http::HeaderValue,
    token: String,
    /// Requests started before this are sent but not recorded (warm-up).
    measure_from: Instant,
    deadline: Instant,
    first_hotel: i64,
    last_hotel: i64,
    /// `--hotel-window`: hotels held at a time (0: all), and when the window started.
    hotel_window: i64,
    started: Instant,
    room_types: i64,
    first: NaiveDate,
    /// Possible first nights of a stay: 0..starts.
    starts: u64,
    hot_offset: u64,
    reads_per_hold: u32,
    /// Makes idempotency keys and guest e-mails unique across runs.
    nonce: String,
    /// `spread-plans`: the plan the holds name, the guests, and the total each hold must
    /// be answered with.
    rate_plan: i64,
    guests: i64,
    hold_total_cents: Option<i64>,
    /// `search`: the query up to its dates (`/v1/availability?city=..&rooms=1&guests=..&limit=..`).
    search_path: String,
    limit: u32,
    /// `search`: each plan's total for a stay, to check offers against.
    offer_totals: Vec<(i64, i64)>,
}

enum Op {
    Hold {
        hotel: i64,
        room_type: i64,
        start: NaiveDate,
    },
    Read {
        hotel: i64,
        start: NaiveDate,
    },
    Search {
        start: NaiveDate,
    },
    Calendar {
        hotel: i64,
        start: NaiveDate,
    },
}

/// Nights in a `calendar` request: a month, as the console shows it.
const CALENDAR_NIGHTS: u64 = 31;

impl Plan {
    /// A hotel to hold at: any of the catalog's, or one of the window's (see
    /// `--hotel-window`).
    fn hold_hotel(&self, rng: &mut StdRng) -> i64 {
        let hotels = self.last_hotel - self.first_hotel + 1;
        if self.hotel_window <= 0 || self.hotel_window >= hotels {
            return rng.gen_range(self.first_hotel..=self.last_hotel);
        }
        let second = i64::try_from(self.started.elapsed().as_secs()).unwrap_or(0);
        let start = second.wrapping_mul(self.hotel_window).rem_euclid(hotels);
        self.first_hotel + (start + rng.gen_range(0..self.hotel_window)) % hotels
    }

    fn next(&self, rng: &mut StdRng) -> Op {
        let random_hold = |rng: &mut StdRng| Op::Hold {
            hotel: self.hold_hotel(rng),
            room_type: rng.gen_range(1..=self.room_types),
            start: self.night(rng.gen_range(0..self.starts)),
        };
        let random_read = |rng: &mut StdRng| Op::Read {
            hotel: rng.gen_range(self.first_hotel..=self.last_hotel),
            start: self.night(rng.gen_range(0..self.starts)),
        };
        match self.scenario {
            Scenario::Spread | Scenario::SpreadPlans => random_hold(rng),
            Scenario::Hot => Op::Hold {
                hotel: self.first_hotel,
                room_type: 1,
                start: self.night(self.hot_offset),
            },
            Scenario::Reads => random_read(rng),
            Scenario::Search => Op::Search {
                start: self.night(rng.gen_range(0..self.starts)),
            },
            Scenario::Calendar => Op::Calendar {
                hotel: rng.gen_range(self.first_hotel..=self.last_hotel),
                start: self.night(rng.gen_range(0..self.starts)),
            },
            Scenario::SearchBooking => {
                if rng.gen_range(0..=self.reads_per_hold) == 0 {
                    random_hold(rng)
                } else {
                    Op::Search {
                        start: self.night(rng.gen_range(0..self.starts)),
                    }
                }
            }
            Scenario::Mixed => {
                if rng.gen_range(0..=self.reads_per_hold) == 0 {
                    random_hold(rng)
                } else {
                    random_read(rng)
                }
            }
        }
    }

    fn night(&self, offset: u64) -> NaiveDate {
        self.first + Days::new(offset)
    }
}

/// What one client recorded.
struct ClientResult {
    holds: KindStats,
    reads: KindStats,
    searches: KindStats,
    calendars: KindStats,
    /// Every reservation acknowledged with 201, warm-up included.
    acknowledged: Vec<Uuid>,
}

#[derive(Deserialize)]
struct Held {
    reservation_id: Uuid,
    #[serde(default)]
    total_cents: Option<i64>,
    #[serde(default)]
    rate_plan_id: Option<i64>,
}

/// A city search's answer, as far as the load generator checks it.
#[derive(Deserialize)]
struct SearchAnswer {
    hotels: Vec<SearchHotel>,
}

#[derive(Deserialize)]
struct SearchHotel {
    hotel_id: i64,
    offers: Vec<Offer>,
}

#[derive(Deserialize)]
struct Offer {
    room_type_id: i64,
    rate_plan_id: Option<i64>,
    total_cents: i64,
    remaining: i64,
    refundable: bool,
}

/// One search answer in this many (per client) is parsed and checked.
const SEARCH_SAMPLE: u64 = 8;

#[derive(Deserialize)]
struct Refusal {
    error: String,
}

/// Why a request got no answer.
enum Failure {
    Timeout,
    Transport,
}

impl From<hyper::Error> for Failure {
    fn from(_: hyper::Error) -> Self {
        Self::Transport
    }
}

impl From<std::io::Error> for Failure {
    fn from(_: std::io::Error) -> Self {
        Self::Transport
    }
}

/// `host:port` of an `http://` URL, as a `Host` header value; checked once, before any
/// client starts.
fn authority(url: &str) -> anyhow::Result<http::HeaderValue> {
    let url: http::Uri = url.parse().context("--url is not a URL")?;
    anyhow::ensure!(
        url.scheme_str() == Some("http"),
        "--url must be http:// (the load generator does not speak TLS)"
    );
    url.authority()
        .context("--url has no host")?
        .as_str()
        .parse()
        .context("--url's host is not a valid Host header")
}

/// One client's keep-alive connection: HTTP/1.1 on a bare hyper connection. A load
/// generator shares the machine with what it measures; `reqwest` parsed the URL (and
/// its host, through IDNA), built a header map and looked up its pool on every request,
/// which made the client half the CPU the server took under `reads`.
struct Connection {
    authority: http::HeaderValue,
    sender: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
}

impl Connection {
    fn new(authority: http::HeaderValue) -> Self {
        Self {
            authority,
            sender: None,
        }
    }

    /// Sends one request and reads the whole answer; a failed or timed-out exchange
    /// drops the connection, and the next request opens a new one.
    async fn send(
        &mut self,
        request: http::request::Builder,
        body: Bytes,
        timeout: Duration,
    ) -> Result<(u16, Bytes), Failure> {
        let request = request
            .header(http::header::HOST, self.authority.clone())
            .body(Full::new(body))
            .map_err(|_| Failure::Transport)?;
        let exchange = async {
            let mut sender = match self.sender.take() {
                Some(sender) => sender,
                None => self.connect().await?,
            };
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await?.to_bytes();
            Ok((sender, status, body))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok((sender, status, body))) => {
                self.sender = Some(sender);
                Ok((status, body))
            }
            Ok(Err(failure)) => Err(failure),
            Err(_) => Err(Failure::Timeout),
        }
    }

    async fn connect(
        &self,
    ) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, Failure> {
        let address = self.authority.to_str().map_err(|_| Failure::Transport)?;
        let stream = tokio::net::TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        // Drives the connection; ends when the sender is dropped or the server closes.
        tokio::spawn(connection);
        Ok(sender)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Hold,
    Read,
    Search,
    Calendar,
}

async fn client(plan: Arc<Plan>, number: u32, timeout: Duration) -> anyhow::Result<ClientResult> {
    // One client, one connection: keep-alive, no pool sharing between tasks.
    let mut connection = Connection::new(plan.authority.clone());
    let mut rng = StdRng::from_entropy();
    let mut result = ClientResult {
        holds: KindStats::new()?,
        reads: KindStats::new()?,
        searches: KindStats::new()?,
        calendars: KindStats::new()?,
        acknowledged: Vec::new(),
    };
    let auth = format!("Bearer {}", plan.token);
    let with_plan = matches!(
        plan.scenario,
        Scenario::SpreadPlans | Scenario::SearchBooking
    );
    let mut n: u64 = 0;
    let mut searched: u64 = 0;
    loop {
        let started = Instant::now();
        if started >= plan.deadline {
            break;
        }
        let measured = started >= plan.measure_from;
        n += 1;
        let (kind, request, body) = match plan.next(&mut rng) {
            Op::Hold {
                hotel,
                room_type,
                start,
            } => {
                let tag = format!("lg-{}-{number}-{n}", plan.nonce);
                let mut body = json!({
                    "hotel_id": hotel, "room_type_id": room_type,
                    "start_date": start, "end_date": start + Days::new(STAY_NIGHTS),
                    "rooms": 1,
                    "guest": {"name": "Load Generator", "email": format!("{tag}@loadgen.example")},
                });
                if with_plan {
                    body["rate_plan_id"] = json!(plan.rate_plan);
                    body["guests"] = json!(plan.guests);
                }
                (
                    Kind::Hold,
                    http::Request::post("/v1/reservations")
                        .header(http::header::AUTHORIZATION, &auth)
                        .header(http::header::CONTENT_TYPE, "application/json")
                        .header("Idempotency-Key", tag),
                    Bytes::from(serde_json::to_vec(&body)?),
                )
            }
            Op::Read { hotel, start } => (
                Kind::Read,
                http::Request::get(format!(
                    "/v1/hotels/{hotel}/availability?start_date={start}&end_date={}&rooms=1",
                    start + Days::new(STAY_NIGHTS)
                ))
                .header(http::header::AUTHORIZATION, &auth),
                Bytes::new(),
            ),
            Op::Search { start } => (
                Kind::Search,
                http::Request::get(format!(
                    "{}&start_date={start}&end_date={}",
                    plan.search_path,
                    start + Days::new(STAY_NIGHTS)
                ))
                .header(http::header::AUTHORIZATION, &auth),
                Bytes::new(),
            ),
            Op::Calendar { hotel, start } => (
                Kind::Calendar,
                http::Request::get(format!(
                    "/v1/hotels/{hotel}/calendar?start_date={start}&end_date={}",
                    start + Days::new(CALENDAR_NIGHTS)
                ))
                .header(http::header::AUTHORIZATION, &auth),
                Bytes::new(),
            ),
        };
        let outcome = connection.send(request, body, timeout).await;
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let stats = match kind {
            Kind::Hold => &mut result.holds,
            Kind::Read => &mut result.reads,
            Kind::Search => &mut result.searches,
            Kind::Calendar => &mut result.calendars,
        };
        match outcome {
            Ok((status, body)) => {
                let ok = match kind {
                    Kind::Hold => status == 201,
                    Kind::Read | Kind::Search | Kind::Calendar => status == 200,
                };
                if kind == Kind::Hold && ok {
                    match serde_json::from_slice::<Held>(&body) {
                        Ok(held) => {
                            result.acknowledged.push(held.reservation_id);
                            if measured
                                && plan.hold_total_cents.is_some()
                                && (held.total_cents != plan.hold_total_cents
                                    || held.rate_plan_id != Some(plan.rate_plan))
                            {
                                stats::bump(&mut stats.errors, "wrong_total".into());
                            }
                        }
                        Err(_) => {
                            if measured {
                                stats::bump(&mut stats.errors, "201_without_id".into());
                            }
                        }
                    }
                }
                if measured {
                    stats.record(status, ok, micros);
                    if !(200..300).contains(&status) {
                        let code = serde_json::from_slice::<Refusal>(&body)
                            .map_or_else(|_| format!("{status}_unparsed"), |r| r.error);
                        stats::bump(&mut stats.errors, code);
                    } else if kind != Kind::Hold {
                        stats::bump(&mut stats.sources, source(&body));
                    }
                    if kind == Kind::Search && ok {
                        searched += 1;
                        if searched % SEARCH_SAMPLE == 1 {
                            check_search(&plan, &body, &mut stats.sample);
                        }
                    }
                }
            }
            Err(failure) => {
                if measured {
                    stats.record_failure(match failure {
                        Failure::Timeout => "timeout",
                        Failure::Transport => "transport_error",
                    });
                }
                // Do not spin on a server that is gone.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    Ok(result)
}

/// The `source` an answer names (`cache`, `database`, ...), found without parsing it.
fn source(body: &[u8]) -> String {
    const KEY: &[u8] = b"\"source\":\"";
    let Some(at) = body.windows(KEY.len()).position(|w| w == KEY) else {
        return "unknown".into();
    };
    let rest = &body[at + KEY.len()..];
    match rest.iter().take(32).position(|b| *b == b'"') {
        Some(end) => String::from_utf8_lossy(&rest[..end]).into_owned(),
        None => "unknown".into(),
    }
}

/// Checks a sampled search answer against the catalog and the plans' prices, and counts
/// what it holds: `answers`, `hotels`, `offers`; problems as `bad_answer` (it did not
/// parse as the contract says), `bad_offer` (a hotel outside the catalog or beyond the
/// limit, an unknown room type or plan, no room left), `wrong_total` (a total or
/// refundability that is not the plan's).
fn check_search(plan: &Plan, body: &[u8], sample: &mut BTreeMap<String, u64>) {
    let mut add = |key: &str, n: u64| *sample.entry(key.to_owned()).or_default() += n;
    let Ok(answer) = serde_json::from_slice::<SearchAnswer>(body) else {
        add("bad_answer", 1);
        return;
    };
    add("answers", 1);
    add("hotels", answer.hotels.len() as u64);
    if answer.hotels.len() > plan.limit as usize {
        add("bad_offer", 1);
    }
    for hotel in &answer.hotels {
        add("offers", hotel.offers.len() as u64);
        if !(plan.first_hotel..=plan.last_hotel).contains(&hotel.hotel_id) {
            add("bad_offer", 1);
            continue;
        }
        for offer in &hotel.offers {
            let known = (1..=plan.room_types).contains(&offer.room_type_id) && offer.remaining >= 1;
            let expected = offer.rate_plan_id.and_then(|id| {
                let total = plan.offer_totals.iter().find(|(p, _)| *p == id)?.1;
                let refundable = plans::PLANS.iter().find(|p| p.0 == id)?.2;
                Some((total, refundable))
            });
            match expected {
                _ if !known => add("bad_offer", 1),
                None => add("bad_offer", 1),
                Some((total, refundable)) => {
                    if offer.total_cents != total || offer.refundable != refundable {
                        add("wrong_total", 1);
                    }
                }
            }
        }
    }
}

/// `s` with everything but unreserved characters percent-encoded, for a query.
fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The server's counters a run reports the change of, from `/metrics`: the unit of
/// work's contention, and how the city search judged its hotels (from the offers it
/// kept for the same nights, or from the nights).
#[derive(Debug, Clone, Copy, Default)]
struct Contention {
    conflicts: f64,
    retries: f64,
    exhausted: f64,
    judged_from_memo: f64,
    judged_from_nights: f64,
}

async fn contention(url: &str) -> Option<Contention> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .ok()?;
    let text = http
        .get(format!("{url}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(Contention {
        conflicts: prom::counter(&text, "unit_of_work_conflicts_total"),
        retries: prom::counter(&text, "unit_of_work_retries_total"),
        exhausted: prom::counter(&text, "unit_of_work_exhausted_total"),
        judged_from_memo: prom::gauge_with_label(&text, "search_hotels_judged_total", "memo")
            .unwrap_or(0.0),
        judged_from_nights: prom::gauge_with_label(&text, "search_hotels_judged_total", "nights")
            .unwrap_or(0.0),
    })
}

/// One run, as printed with `--json` and appended to `--out`.
#[derive(Debug, Serialize)]
pub struct RunRecord {
    pub kind: &'static str,
    pub scenario: &'static str,
    pub label: Option<String>,
    pub clients: u32,
    /// Measured time: from the end of the warm-up until the last request answered.
    pub seconds: f64,
    pub warmup: f64,
    /// Successful operations per second (201 holds and 200 reads).
    pub goodput: f64,
    pub ok: u64,
    pub requests: u64,
    /// Percentiles of successful operations of every kind.
    #[serde(flatten)]
    pub latency: Latency,
    pub statuses: BTreeMap<String, u64>,
    pub errors: BTreeMap<String, u64>,
    /// Deltas of the server's unit-of-work counters over the measured time.
    pub conflicts: Option<u64>,
    pub retries: Option<u64>,
    pub exhausted: Option<u64>,
    /// Of the hotels the city searches judged over the measured time, the share whose
    /// offers were those kept for the same nights (the server's offer memo); `None`
    /// when no search judged a hotel.
    pub memo_share: Option<f64>,
    pub invariant_ok: Option<bool>,
    pub invariant: Option<InvariantReport>,
    pub kinds: BTreeMap<&'static str, KindSummary>,
    pub started_at: String,
}

/// Runs the scenario; `Ok(false)` when the invariant check failed.
pub async fn run(args: RunArgs) -> anyhow::Result<bool> {
    anyhow::ensure!(
        args.seconds > 0.0 && args.warmup >= 0.0,
        "--seconds must be positive"
    );
    let url = args.url.trim_end_matches('/').to_owned();
    let first = args.catalog.first_night()?;
    // Every date the run computes lies in this range.
    first
        .checked_add_days(Days::new(args.catalog.nights))
        .context("date out of range")?;
    let started_at = Utc::now();
    let begin = Instant::now();
    let measure_from = begin + Duration::from_secs_f64(args.warmup);
    let plan = Arc::new(Plan {
        scenario: args.scenario,
        authority: authority(&url)?,
        token: args.token.clone(),
        measure_from,
        deadline: measure_from + Duration::from_secs_f64(args.seconds),
        first_hotel: args.catalog.first_hotel,
        last_hotel: args.catalog.last_hotel(),
        hotel_window: args.hotel_window,
        started: begin,
        room_types: args.catalog.room_types,
        first,
        starts: args.catalog.nights - STAY_NIGHTS + 1,
        hot_offset: args.catalog.hot_offset(),
        reads_per_hold: args.reads_per_hold,
        nonce: Uuid::new_v4().simple().to_string()[..12].to_owned(),
        rate_plan: args.rate_plan,
        guests: args.guests,
        hold_total_cents: match args.scenario {
            Scenario::SpreadPlans | Scenario::SearchBooking => Some(
                plans::night_price(args.rate_plan, args.plan_rate_cents)
                    .context("--rate-plan: not one of the plans setup --plans creates")?
                    * STAY_NIGHTS as i64,
            ),
            _ => None,
        },
        search_path: format!(
            "/v1/availability?city={}&rooms=1&guests={}&limit={}",
            query_value(&args.city),
            args.guests,
            args.limit
        ),
        limit: args.limit,
        offer_totals: plans::PLANS
            .iter()
            .filter_map(|p| {
                Some((
                    p.0,
                    plans::night_price(p.0, args.plan_rate_cents)? * STAY_NIGHTS as i64,
                ))
            })
            .collect(),
    });
    let timeout = Duration::from_millis(args.timeout_ms);
    let tasks: Vec<_> = (0..args.clients)
        .map(|number| tokio::spawn(client(Arc::clone(&plan), number, timeout)))
        .collect();
    tokio::time::sleep_until(measure_from.into()).await;
    let before = contention(&url).await;

    let mut holds = KindStats::new()?;
    let mut reads = KindStats::new()?;
    let mut searches = KindStats::new()?;
    let mut calendars = KindStats::new()?;
    let mut acknowledged = Vec::new();
    for task in tasks {
        let result = task.await.context("a client task failed")??;
        holds.merge(&result.holds)?;
        reads.merge(&result.reads)?;
        searches.merge(&result.searches)?;
        calendars.merge(&result.calendars)?;
        acknowledged.extend(result.acknowledged);
    }
    let seconds = measure_from.elapsed().as_secs_f64();
    let after = contention(&url).await;
    let delta = match (before, after) {
        (Some(b), Some(a)) => Some(Contention {
            conflicts: a.conflicts - b.conflicts,
            retries: a.retries - b.retries,
            exhausted: a.exhausted - b.exhausted,
            judged_from_memo: a.judged_from_memo - b.judged_from_memo,
            judged_from_nights: a.judged_from_nights - b.judged_from_nights,
        }),
        _ => None,
    };

    acknowledged.sort_unstable();
    acknowledged.dedup();
    let invariant = match &args.database_url {
        Some(database_url) => Some(invariant::check(database_url, &acknowledged).await?),
        None => None,
    };

    let mut kinds = BTreeMap::new();
    let mut all = KindStats::new()?;
    if holds.requests() > 0
        || matches!(
            args.scenario,
            Scenario::Spread | Scenario::Hot | Scenario::SpreadPlans
        )
    {
        kinds.insert("hold", holds.summary(seconds));
        all.merge(&holds)?;
    }
    if reads.requests() > 0 || matches!(args.scenario, Scenario::Reads | Scenario::Mixed) {
        kinds.insert("read", reads.summary(seconds));
        all.merge(&reads)?;
    }
    if searches.requests() > 0
        || matches!(args.scenario, Scenario::Search | Scenario::SearchBooking)
    {
        kinds.insert("search", searches.summary(seconds));
        all.merge(&searches)?;
    }
    if calendars.requests() > 0 || args.scenario == Scenario::Calendar {
        kinds.insert("calendar", calendars.summary(seconds));
        all.merge(&calendars)?;
    }
    let record = RunRecord {
        kind: "run",
        scenario: args.scenario.name(),
        label: args.label.clone(),
        clients: args.clients,
        seconds: stats::round2(seconds),
        warmup: args.warmup,
        goodput: stats::rate(all.ok.len(), seconds),
        ok: all.ok.len(),
        requests: all.requests(),
        latency: Latency::of(&all.ok),
        statuses: all.statuses.clone(),
        errors: all.errors.clone(),
        conflicts: delta.map(|d| d.conflicts.max(0.0) as u64),
        retries: delta.map(|d| d.retries.max(0.0) as u64),
        exhausted: delta.map(|d| d.exhausted.max(0.0) as u64),
        memo_share: delta.and_then(|d| {
            let judged = d.judged_from_memo + d.judged_from_nights;
            // Four places: the share is near 1 when searches repeat between bookings.
            (judged > 0.0).then(|| (d.judged_from_memo / judged * 10_000.0).round() / 10_000.0)
        }),
        invariant_ok: invariant.as_ref().map(|i| i.ok),
        invariant,
        kinds,
        started_at: started_at.to_rfc3339(),
    };
    print_table(&record);
    stats::write_record(&record, args.json, args.out.as_deref())?;
    Ok(record.invariant_ok != Some(false))
}

fn statuses(map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "-".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_table(r: &RunRecord) {
    let label = r.label.as_deref().unwrap_or("-");
    println!(
        "{:<12} {:<12} {:>7} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "run", "label", "clients", "seconds", "ok/s", "p50 ms", "p90 ms", "p99 ms", "max ms"
    );
    println!(
        "{:<12} {:<12} {:>7} {:>7.1} {:>10.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
        r.scenario,
        label,
        r.clients,
        r.seconds,
        r.goodput,
        r.latency.p50_ms,
        r.latency.p90_ms,
        r.latency.p99_ms,
        r.latency.max_ms
    );
    for (kind, k) in &r.kinds {
        println!(
            "  {kind:<5} {:>8} ok {:>10.1}/s  p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2} ms  (p99 of all answers {:.2} ms)",
            k.ok, k.goodput, k.latency.p50_ms, k.latency.p90_ms, k.latency.p99_ms, k.latency.max_ms, k.all_p99_ms
        );
        println!("        statuses: {}", statuses(&k.statuses));
        if !k.errors.is_empty() {
            println!("        errors: {}", statuses(&k.errors));
        }
        if !k.sources.is_empty() {
            println!("        read from: {}", statuses(&k.sources));
        }
        if let Some(&answers) = k.sample.get("answers") {
            let per =
                |key: &str| k.sample.get(key).copied().unwrap_or(0) as f64 / answers.max(1) as f64;
            println!(
                "        sampled answers: {answers}, {:.1} hotels and {:.1} offers each; {}",
                per("hotels"),
                per("offers"),
                statuses(&k.sample)
            );
        }
    }
    match (r.conflicts, r.retries, r.exhausted) {
        (Some(c), Some(t), Some(e)) => {
            println!("  unit of work: {c} conflicts, {t} retries, {e} gave up")
        }
        _ => println!("  unit of work: counters unavailable (/metrics did not answer)"),
    }
    if r.errors.contains_key("sold_out") {
        println!("  WARNING: sold_out answers: the inventory is too small for this run");
    }
    if r.errors.contains_key("restricted") {
        println!(
            "  WARNING: restricted answers: the catalog's restrictions refuse stays this run makes"
        );
    }
    let wrong = r.errors.get("wrong_total").copied().unwrap_or(0)
        + r.kinds
            .values()
            .map(|k| {
                k.sample.get("wrong_total").copied().unwrap_or(0)
                    + k.sample.get("bad_offer").copied().unwrap_or(0)
                    + k.sample.get("bad_answer").copied().unwrap_or(0)
            })
            .sum::<u64>();
    if wrong > 0 {
        println!("  WARNING: {wrong} answers or offers differ from the catalog's plans and prices");
    }
    match &r.invariant {
        None => println!("  invariant: not checked (no --database-url)"),
        Some(i) => {
            println!(
                "  invariant: {} ({} nights: {} oversold, {} counters differ from allocations; {}/{} acknowledged holds found)",
                if i.ok { "ok" } else { "VIOLATED" },
                i.nights_checked,
                i.oversold_nights,
                i.counter_mismatches,
                i.acknowledged_found,
                i.acknowledged_holds
            );
            for p in &i.problems {
                println!("    {p}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search_plan() -> Plan {
        let now = Instant::now();
        Plan {
            scenario: Scenario::Search,
            authority: http::HeaderValue::from_static("127.0.0.1:8080"),
            token: String::new(),
            measure_from: now,
            deadline: now,
            first_hotel: 2_000_001,
            last_hotel: 2_000_050,
            hotel_window: 0,
            started: Instant::now(),
            room_types: 3,
            first: NaiveDate::from_ymd_opt(2027, 1, 4).expect("date"),
            starts: 10,
            hot_offset: 0,
            reads_per_hold: 0,
            nonce: String::new(),
            rate_plan: plans::HOLD_PLAN,
            guests: 2,
            hold_total_cents: None,
            search_path: String::new(),
            limit: 20,
            offer_totals: vec![(1, 45_000), (2, 40_500), (3, 51_750)],
        }
    }

    #[test]
    fn a_hotel_window_holds_at_its_hotels_and_moves_on_every_second() {
        let mut rng = StdRng::seed_from_u64(7);
        let windowed = |window: i64, started: Instant| Plan {
            hotel_window: window,
            started,
            ..search_plan()
        };

        // Started now: the first 4 of the 50 hotels
        let plan = windowed(4, Instant::now());
        let hotels: std::collections::BTreeSet<i64> =
            (0..400).map(|_| plan.hold_hotel(&mut rng)).collect();
        assert_eq!(hotels, (2_000_001..=2_000_004).collect());

        // 13 seconds on: hotels 53..56 of 50, i.e. the window wraps to 3..6
        let Some(earlier) = Instant::now().checked_sub(Duration::from_secs(13)) else {
            return;
        };
        let plan = windowed(4, earlier);
        let hotels: std::collections::BTreeSet<i64> =
            (0..400).map(|_| plan.hold_hotel(&mut rng)).collect();
        assert_eq!(hotels, (2_000_003..=2_000_006).collect());

        // No window: every hotel
        let plan = windowed(0, Instant::now());
        let hotels: std::collections::BTreeSet<i64> =
            (0..2_000).map(|_| plan.hold_hotel(&mut rng)).collect();
        assert_eq!(hotels.len(), 50);
    }

    #[test]
    fn a_search_answer_is_counted_and_checked_against_the_plans() {
        let plan = search_plan();
        let body = br#"{"start_date":"2027-01-04","end_date":"2027-01-07","as_of":"2027-01-01T00:00:00Z",
            "source":"cache","hotels":[
              {"hotel_id":2000001,"name":"Bench Hotel 2000001","city":"Searchville","offers":[
                {"room_type_id":1,"rate_plan_id":1,"total_cents":45000,"remaining":10,"refundable":true},
                {"room_type_id":1,"rate_plan_id":2,"total_cents":40500,"remaining":10,"refundable":false},
                {"room_type_id":2,"rate_plan_id":3,"total_cents":51750,"remaining":1,"refundable":true}]},
              {"hotel_id":2000002,"name":"Bench Hotel 2000002","city":"Searchville","offers":[
                {"room_type_id":3,"rate_plan_id":2,"total_cents":45000,"remaining":3,"refundable":false},
                {"room_type_id":4,"rate_plan_id":1,"total_cents":45000,"remaining":3,"refundable":true}]}]}"#;
        assert_eq!(source(body), "cache");
        let mut sample = BTreeMap::new();
        check_search(&plan, body, &mut sample);
        assert_eq!(sample.get("answers"), Some(&1));
        assert_eq!(sample.get("hotels"), Some(&2));
        assert_eq!(sample.get("offers"), Some(&5));
        assert_eq!(
            sample.get("wrong_total"),
            Some(&1),
            "plan 2 at plan 1's price"
        );
        assert_eq!(
            sample.get("bad_offer"),
            Some(&1),
            "room type 4 does not exist"
        );
        check_search(&plan, br#"{"hotels":{}}"#, &mut sample);
        assert_eq!(sample.get("bad_answer"), Some(&1));
        assert_eq!(source(b"{}"), "unknown");
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("Searchville"), "Searchville");
        assert_eq!(query_value("São Paulo&x"), "S%C3%A3o%20Paulo%26x");
    }

    #[test]
    fn the_url_gives_the_host_to_connect_to_and_anything_but_plain_http_is_refused() {
        let host = authority("http://127.0.0.1:8080").expect("plain http");
        assert_eq!(host.to_str().ok(), Some("127.0.0.1:8080"));
        assert!(
            authority("https://127.0.0.1:8443").is_err(),
            "TLS is refused"
        );
        assert!(authority("/v1/reservations").is_err(), "no scheme, no host");
        assert!(authority("not a url").is_err());
    }
}
