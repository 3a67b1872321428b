//! `loadgen report`: the final table of a bench run — every figure with its ratio to the
//! raw-SQL baseline measured in the same run, and whether its target is met.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use crate::ReportArgs;

/// The targets of the benchmarks issue.
const SPREAD_MIN_RATIO: f64 = 0.5;
const SPREAD_MAX_P99_MS: f64 = 50.0;
const HOT_MIN_RATIO: f64 = 1.0;
const HOT_MAX_P99_MS: f64 = 100.0;
const READS_MIN_PER_SECOND: f64 = 10_000.0;
const READS_MAX_P99_MS: f64 = 10.0;
const SERVER_MAX_MB: f64 = 150.0;
/// The rate plans' scenarios: the city search, and spread holds with plans and restrictions in force
/// against the same run's spread without them.
const SEARCH_MIN_PER_SECOND: f64 = 3_000.0;
const SEARCH_MAX_P99_MS: f64 = 20.0;
const PLANS_MIN_RATIO: f64 = 0.90;

fn read_lines(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("a line of {}", path.display())))
        .collect()
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn num_of(v: Option<&Value>, key: &str) -> Option<f64> {
    v.and_then(|v| num(v, key))
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

struct Baseline(Vec<Value>);

impl Baseline {
    /// Baseline tps of `workload` at `clients`.
    fn tps(&self, workload: &str, clients: f64) -> Option<f64> {
        self.0
            .iter()
            .rev()
            .filter(|v| text(v, "kind") == "baseline" && text(v, "workload") == workload)
            .find(|v| num(v, "clients") == Some(clients))
            .and_then(|v| num(v, "tps"))
    }

    /// Peak memory of every server of the run, in MB (10^6 bytes), by label.
    fn peak_rss_mb(&self) -> Vec<(String, f64)> {
        self.0
            .iter()
            .filter(|v| text(v, "kind") == "server")
            .filter_map(|v| {
                Some((
                    text(v, "label").to_owned(),
                    num(v, "peak_rss_kb")? * 1024.0 / 1e6,
                ))
            })
            .collect()
    }
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "NOT MET",
        None => "no figure",
    }
}

struct Table(Vec<[String; 6]>);

impl Table {
    fn row(
        &mut self,
        figure: String,
        measured: Option<f64>,
        baseline: Option<f64>,
        ratio: Option<f64>,
        target: &str,
        met: Option<bool>,
    ) {
        // Counts without decimals, shares with four, rates and milliseconds with one.
        let count = ["nights", "requests", "events", "refused"]
            .iter()
            .any(|w| figure.contains(w));
        let share = figure.contains("(share)");
        let f = |x: Option<f64>| {
            x.map_or("-".to_owned(), |x| {
                if count {
                    format!("{x:.0}")
                } else if share {
                    format!("{x:.4}")
                } else {
                    format!("{x:.1}")
                }
            })
        };
        let verdict = if target.starts_with('(') {
            String::new()
        } else {
            verdict(met).to_owned()
        };
        self.0.push([
            figure.clone(),
            f(measured),
            f(baseline),
            ratio.map_or("-".to_owned(), |r| format!("{r:.2}x")),
            target.to_owned(),
            verdict,
        ]);
    }

    fn print(&self) {
        println!(
            "{:<44} {:>10} {:>10} {:>7}  {:<26} verdict",
            "figure", "measured", "baseline", "ratio", "target"
        );
        for r in &self.0 {
            println!(
                "{:<44} {:>10} {:>10} {:>7}  {:<26} {}",
                r[0], r[1], r[2], r[3], r[4], r[5]
            );
        }
    }
}

/// Prints the report; `Ok(false)` when any run broke the invariant.
pub fn report(args: &ReportArgs) -> anyhow::Result<bool> {
    let main = read_lines(&args.main)?;
    let sweep = match &args.sweep {
        Some(p) if p.exists() => read_lines(p)?,
        _ => Vec::new(),
    };
    let baseline = Baseline(match &args.baseline {
        Some(p) if p.exists() => read_lines(p)?,
        _ => Vec::new(),
    });
    // The first run of a scenario: spread may run several times (interleaved with
    // spread-plans), and its first run, on the freshly loaded catalog, is the one
    // compared with the baseline.
    let runs = |records: &[Value], scenario: &str| -> Option<Value> {
        records
            .iter()
            .find(|v| text(v, "kind") == "run" && text(v, "scenario") == scenario)
            .cloned()
    };
    let all_of = |scenario: &str| -> Vec<&Value> {
        main.iter()
            .filter(|v| text(v, "kind") == "run" && text(v, "scenario") == scenario)
            .collect()
    };
    let mean = |runs: &[&Value], key: &str| -> Option<f64> {
        let values: Vec<f64> = runs.iter().filter_map(|v| num(v, key)).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let error_count = |run: &Value, code: &str| -> f64 {
        run.get("errors").and_then(|e| num(e, code)).unwrap_or(0.0)
    };
    let mut table = Table(Vec::new());

    for (scenario, min_ratio, max_p99) in [
        ("spread", SPREAD_MIN_RATIO, SPREAD_MAX_P99_MS),
        ("hot", HOT_MIN_RATIO, HOT_MAX_P99_MS),
    ] {
        let Some(run) = runs(&main, scenario) else {
            table.row(format!("{scenario}: no run"), None, None, None, "", None);
            continue;
        };
        let clients = num(&run, "clients").unwrap_or(0.0);
        let goodput = num(&run, "goodput");
        let base = baseline.tps(scenario, clients);
        let ratio = goodput.zip(base).map(|(g, b)| g / b);
        table.row(
            format!("{scenario} holds/s ({clients} clients)"),
            goodput,
            base,
            ratio,
            &format!(">= {min_ratio}x baseline"),
            ratio.map(|r| r >= min_ratio),
        );
        let p99 = num(&run, "p99_ms");
        table.row(
            format!("{scenario} p99 ms ({clients} clients)"),
            p99,
            None,
            None,
            &format!("< {max_p99} ms"),
            p99.map(|p| p < max_p99),
        );
        if scenario == "hot" {
            let oversold = run.get("invariant").and_then(|i| num(i, "oversold_nights"));
            table.row(
                format!("hot oversold nights ({clients} clients)"),
                oversold,
                None,
                None,
                "0",
                oversold.map(|o| o == 0.0),
            );
        }
    }
    let plain = all_of("spread");
    let planned = all_of("spread-plans");
    if !planned.is_empty() {
        let clients = num(planned[0], "clients").unwrap_or(0.0);
        let (b, a) = (mean(&planned, "goodput"), mean(&plain, "goodput"));
        let ratio = b.zip(a).map(|(b, a)| b / a);
        table.row(
            format!(
                "spread+plans holds/s ({clients} cl., mean of {}/{})",
                planned.len(),
                plain.len()
            ),
            b,
            a,
            ratio,
            &format!(">= {PLANS_MIN_RATIO}x spread, no plans"),
            ratio.map(|r| r >= PLANS_MIN_RATIO),
        );
        let (b, a) = (mean(&planned, "p99_ms"), mean(&plain, "p99_ms"));
        table.row(
            "spread+plans p99 ms (mean; vs no plans)".into(),
            b,
            a,
            b.zip(a).map(|(b, a)| b / a),
            "(no target)",
            None,
        );
        let refused: f64 = planned
            .iter()
            .map(|r| error_count(r, "restricted") + error_count(r, "wrong_total"))
            .sum();
        table.row(
            "spread+plans holds restricted or mispriced".into(),
            Some(refused),
            None,
            None,
            "0",
            Some(refused == 0.0),
        );
    }
    match runs(&main, "reads") {
        Some(run) => {
            let clients = num(&run, "clients").unwrap_or(0.0);
            let goodput = num(&run, "goodput");
            table.row(
                format!("reads/s ({clients} clients)"),
                goodput,
                Some(READS_MIN_PER_SECOND),
                goodput.map(|g| g / READS_MIN_PER_SECOND),
                ">= 10000/s (vs target)",
                goodput.map(|g| g >= READS_MIN_PER_SECOND),
            );
            let p99 = num(&run, "p99_ms");
            table.row(
                format!("reads p99 ms ({clients} clients)"),
                p99,
                None,
                None,
                &format!("< {READS_MAX_P99_MS} ms"),
                p99.map(|p| p < READS_MAX_P99_MS),
            );
        }
        None => table.row("reads: no run".into(), None, None, None, "", None),
    }
    if let Some(run) = runs(&main, "search") {
        let clients = num(&run, "clients").unwrap_or(0.0);
        let goodput = num(&run, "goodput");
        let reads = runs(&main, "reads").and_then(|r| num(&r, "goodput"));
        table.row(
            format!("search/s ({clients} clients; vs reads/s)"),
            goodput,
            reads,
            goodput.zip(reads).map(|(g, r)| g / r),
            &format!(">= {SEARCH_MIN_PER_SECOND}/s"),
            goodput.map(|g| g >= SEARCH_MIN_PER_SECOND),
        );
        // No percentile without a successful search (an endpoint that is not there).
        let answered = num(&run, "ok").is_some_and(|ok| ok > 0.0);
        let p99 = num(&run, "p99_ms").filter(|_| answered);
        let reads_p99 = runs(&main, "reads").and_then(|r| num(&r, "p99_ms"));
        table.row(
            format!("search p99 ms ({clients} clients; vs reads)"),
            p99,
            reads_p99,
            None,
            &format!("< {SEARCH_MAX_P99_MS} ms"),
            p99.map(|p| p < SEARCH_MAX_P99_MS),
        );
        table.row(
            "search p50 ms".into(),
            num(&run, "p50_ms").filter(|_| answered),
            runs(&main, "reads").and_then(|r| num(&r, "p50_ms")),
            None,
            "(no target)",
            None,
        );
        let sample = run
            .get("kinds")
            .and_then(|k| k.get("search"))
            .and_then(|k| k.get("sample"));
        let sampled = |key: &str| sample.and_then(|s| num(s, key));
        let answers = sampled("answers").filter(|a| *a > 0.0);
        for (key, name) in [("hotels", "hotels"), ("offers", "offers")] {
            table.row(
                format!("search {name} per answer (sampled)"),
                answers.map(|a| sampled(key).unwrap_or(0.0) / a),
                None,
                None,
                "(no target)",
                None,
            );
        }
        let wrong = ["bad_answer", "bad_offer", "wrong_total"]
            .iter()
            .filter_map(|k| sampled(k))
            .fold(0.0, |a, b| a + b);
        table.row(
            "search answers refused by the check (sampled)".into(),
            answers.map(|_| wrong),
            None,
            None,
            "0",
            answers.map(|_| wrong == 0.0),
        );
        table.row(
            "search hotels judged from kept offers (share)".into(),
            num(&run, "memo_share"),
            None,
            None,
            "(no target)",
            None,
        );
    }
    // The same searches while holds land in the searched city.
    if let Some(run) = runs(&main, "search-booking") {
        let clients = num(&run, "clients").unwrap_or(0.0);
        let kind = |k: &str, key: &str| {
            run.get("kinds")
                .and_then(|v| v.get(k))
                .and_then(|v| num(v, key))
        };
        let search = runs(&main, "search");
        for (name, key, of_search) in [
            ("searches/s", "goodput", num_of(search.as_ref(), "goodput")),
            ("search p99 ms", "p99_ms", num_of(search.as_ref(), "p99_ms")),
        ] {
            table.row(
                format!("search+booking {name} ({clients} cl.; vs search)"),
                kind("search", key),
                of_search,
                None,
                "(no target)",
                None,
            );
        }
        table.row(
            "search+booking holds/s".into(),
            kind("hold", "goodput"),
            None,
            None,
            "(no target)",
            None,
        );
        table.row(
            "search+booking hotels judged from kept offers (share)".into(),
            num(&run, "memo_share"),
            None,
            None,
            "(no target)",
            None,
        );
    }
    if let Some(run) = runs(&main, "mixed") {
        let clients = num(&run, "clients").unwrap_or(0.0);
        let kind = |k: &str, key: &str| {
            run.get("kinds")
                .and_then(|v| v.get(k))
                .and_then(|v| num(v, key))
        };
        table.row(
            format!("mixed ops/s ({clients} clients)"),
            num(&run, "goodput"),
            None,
            None,
            "(no target)",
            None,
        );
        for (k, name) in [("read", "reads"), ("hold", "holds")] {
            table.row(
                format!("mixed {name}/s"),
                kind(k, "goodput"),
                None,
                None,
                "(no target)",
                None,
            );
            table.row(
                format!("mixed {name} p99 ms"),
                kind(k, "p99_ms"),
                None,
                None,
                "(no target)",
                None,
            );
        }
    }
    if let Some(ari) = main.iter().find(|v| text(v, "kind") == "ari") {
        let shape = format!(
            "{} x {} x {}",
            num(ari, "hotels").unwrap_or(0.0),
            num(ari, "room_types").unwrap_or(0.0),
            num(ari, "nights").unwrap_or(0.0)
        );
        let rows: [(String, &str); 6] = [
            (format!("ari year seconds ({shape})"), "seconds"),
            ("ari year requests".into(), "requests"),
            ("ari year nights set".into(), "nights_set"),
            ("ari year events written".into(), "events"),
            ("ari year request p50 ms".into(), "p50_ms"),
            (
                "ari year: projections caught up after s".into(),
                "caught_up_seconds",
            ),
        ];
        for (figure, key) in rows {
            table.row(figure, num(ari, key), None, None, "(no target)", None);
        }
    }
    let servers = baseline.peak_rss_mb();
    let peak = servers.iter().map(|s| s.1).reduce(f64::max);
    table.row(
        "server peak RSS MB (all servers)".into(),
        peak,
        None,
        None,
        &format!("< {SERVER_MAX_MB} MB"),
        peak.map(|mb| mb < SERVER_MAX_MB),
    );

    let all_runs: Vec<&Value> = main
        .iter()
        .chain(&sweep)
        .filter(|v| text(v, "kind") == "run")
        .collect();
    let broken: Vec<String> = all_runs
        .iter()
        .filter(|v| v.get("invariant_ok").and_then(Value::as_bool) == Some(false))
        .map(|v| {
            format!(
                "{} {} {}",
                text(v, "scenario"),
                text(v, "label"),
                num(v, "clients").unwrap_or(0.0)
            )
        })
        .collect();
    let unchecked = all_runs
        .iter()
        .filter(|v| v.get("invariant_ok").and_then(Value::as_bool).is_none())
        .count();
    println!();
    table.print();
    if !servers.is_empty() {
        let each: Vec<String> = servers
            .iter()
            .map(|(label, mb)| format!("{label} {mb:.1}"))
            .collect();
        println!("server peak RSS MB (VmHWM): {}", each.join(", "));
    }
    println!();
    println!(
        "invariant: {} of {} runs checked, {}",
        all_runs.len() - unchecked,
        all_runs.len(),
        if broken.is_empty() {
            "no violation".to_owned()
        } else {
            format!("VIOLATED in: {}", broken.join(", "))
        }
    );

    if !planned.is_empty() {
        println!();
        println!("spread with and without plans, in the order they ran");
        println!(
            "{:<14} {:>7} {:>9} {:>9} {:>9}  refusals",
            "scenario", "clients", "holds/s", "p50 ms", "p99 ms"
        );
        for run in main.iter().filter(|v| {
            text(v, "kind") == "run" && matches!(text(v, "scenario"), "spread" | "spread-plans")
        }) {
            let errors = run
                .get("errors")
                .and_then(Value::as_object)
                .map(|e| {
                    e.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            println!(
                "{:<14} {:>7} {:>9.1} {:>9.2} {:>9.2}  {}",
                text(run, "scenario"),
                num(run, "clients").unwrap_or(0.0),
                num(run, "goodput").unwrap_or(0.0),
                num(run, "p50_ms").unwrap_or(0.0),
                num(run, "p99_ms").unwrap_or(0.0),
                if errors.is_empty() { "-" } else { &errors }
            );
        }
    }

    if !sweep.is_empty() {
        println!();
        println!(
            "hot strategy sweep (ratio: to the baseline hot at the same clients, where measured)"
        );
        println!(
            "{:<12} {:>7} {:>9} {:>7} {:>9} {:>9} {:>10} {:>8} {:>8}  invariant",
            "strategy",
            "clients",
            "holds/s",
            "ratio",
            "p50 ms",
            "p99 ms",
            "conflicts",
            "retries",
            "gave up"
        );
        for run in sweep
            .iter()
            .filter(|v| text(v, "kind") == "run" && text(v, "scenario") == "hot")
        {
            let clients = num(run, "clients").unwrap_or(0.0);
            let goodput = num(run, "goodput").unwrap_or(0.0);
            let ratio = baseline
                .tps("hot", clients)
                .map_or("-".to_owned(), |b| format!("{:.2}x", goodput / b));
            let count = |k: &str| num(run, k).map_or("-".to_owned(), |c| format!("{c:.0}"));
            println!(
                "{:<12} {:>7} {:>9.1} {:>7} {:>9.2} {:>9.2} {:>10} {:>8} {:>8}  {}",
                text(run, "label"),
                clients,
                goodput,
                ratio,
                num(run, "p50_ms").unwrap_or(0.0),
                num(run, "p99_ms").unwrap_or(0.0),
                count("conflicts"),
                count("retries"),
                count("exhausted"),
                match run.get("invariant_ok").and_then(Value::as_bool) {
                    Some(true) => "ok",
                    Some(false) => "VIOLATED",
                    None => "-",
                }
            );
        }
    }
    Ok(broken.is_empty())
}
