//! `scalechart`: draws a `scripts/scale.sh` run (its `scale.jsonl`) as charts of cost
//! against the size of the history, and prints the run's table in Markdown.
//!
//! ```sh
//! scalechart --input target/scale/RUN/scale.jsonl --out-dir docs/scaling
//! ```
//!
//! One SVG, six panels, each a measure at every point of the run, the x axis the events
//! the growth wrote beyond the catalog's (in millions): spread goodput, read and search
//! throughput, p99 latencies, `audit verify` and rebuild speed, bytes per hold in the
//! database and the WAL, and Redis and the server's memory.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use plotters::prelude::*;
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "scalechart",
    about = "Draw a scale run's costs against history size"
)]
struct Args {
    /// The JSON lines `scripts/scale.sh` wrote.
    #[arg(long)]
    input: PathBuf,
    /// Where `scale.svg` and `scale.md` go.
    #[arg(long, default_value = "docs/scaling")]
    out_dir: PathBuf,
}

/// The measures of one point, as `scale.sh` wrote them (absent: not measured).
struct Point {
    grown: f64,
    log_events: f64,
    spread: Run,
    reads: Run,
    search: Run,
    lag_max: Option<f64>,
    verify: Option<f64>,
    verify_ok: Option<bool>,
    rebuild: Option<f64>,
    bytes_per_hold: Option<f64>,
    wal_per_hold: Option<f64>,
    redis_mb: Option<f64>,
    rss_max_mb: Option<f64>,
    elapsed: Option<f64>,
}

struct Run {
    goodput: Option<f64>,
    p50: Option<f64>,
    p99: Option<f64>,
    invariant_ok: Option<bool>,
}

fn number(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, key| v.get(key))?.as_f64()
}

fn run(v: &Value, key: &str) -> Run {
    Run {
        goodput: number(v, &[key, "goodput"]),
        p50: number(v, &[key, "p50_ms"]),
        p99: number(v, &[key, "p99_ms"]),
        invariant_ok: v
            .get(key)
            .and_then(|r| r.get("invariant_ok"))
            .and_then(Value::as_bool),
    }
}

fn point(v: &Value) -> Option<Point> {
    const MB: f64 = 1024.0 * 1024.0;
    Some(Point {
        grown: number(v, &["grown_events"])?,
        log_events: number(v, &["log_events"])?,
        spread: run(v, "spread"),
        reads: run(v, "reads"),
        search: run(v, "search"),
        lag_max: number(v, &["projection_lag_max_events"]),
        verify: number(v, &["verify", "events_per_s"]),
        verify_ok: v
            .get("verify")
            .and_then(|r| r.get("ok"))
            .and_then(Value::as_bool),
        rebuild: number(v, &["rebuild", "events_per_s"]),
        bytes_per_hold: number(v, &["bytes_per_hold"]),
        wal_per_hold: number(v, &["wal_bytes_per_hold"]),
        redis_mb: number(v, &["redis_bytes"]).map(|b| b / MB),
        rss_max_mb: number(v, &["server_rss_max_kb"]).map(|kb| kb / 1024.0),
        elapsed: number(v, &["elapsed_seconds"]),
    })
}

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// One panel: each series' measured points, joined, on a linear y axis from zero.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    x_max: f64,
    series: &[(&str, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let top = series
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(1.0_f64, f64::max)
        * 1.3; // headroom for the legend
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("events written since the catalog (millions)")
        .y_desc(y_desc)
        .max_light_lines(0)
        .x_label_formatter(&|x| {
            if x_max >= 2.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.2}")
            }
        })
        .y_label_formatter(&|y| {
            if top >= 100.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.1}")
            }
        })
        .draw()?;
    for (i, (label, points)) in series.iter().enumerate() {
        if points.is_empty() {
            continue;
        }
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(*label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn series(points: &[Point], of: impl Fn(&Point) -> Option<f64>) -> Vec<(f64, f64)> {
    points
        .iter()
        .filter_map(|p| Some((p.grown / 1e6, of(p)?)))
        .collect()
}

fn draw(path: &std::path::Path, title: &str, points: &[Point]) -> anyhow::Result<()> {
    let x_max = points.iter().map(|p| p.grown / 1e6).fold(0.1_f64, f64::max) * 1.05;
    let root = SVGBackend::new(path, (1200, 1260)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let areas = root.split_evenly((3, 2));
    let [a, b, c, d, e, f] = areas.as_slice() else {
        anyhow::bail!("six panels expected");
    };
    panel(
        a,
        "spread holds: goodput",
        "holds/s",
        x_max,
        &[("spread (201/s)", series(points, |p| p.spread.goodput))],
    )?;
    panel(
        b,
        "reads: throughput",
        "requests/s",
        x_max,
        &[
            ("hotel availability", series(points, |p| p.reads.goodput)),
            ("city search", series(points, |p| p.search.goodput)),
        ],
    )?;
    panel(
        c,
        "p99 latency",
        "ms",
        x_max,
        &[
            ("spread holds", series(points, |p| p.spread.p99)),
            ("availability", series(points, |p| p.reads.p99)),
            ("city search", series(points, |p| p.search.p99)),
        ],
    )?;
    panel(
        d,
        "reading the whole log",
        "events/s",
        x_max,
        &[
            ("audit verify", series(points, |p| p.verify)),
            ("projection rebuild", series(points, |p| p.rebuild)),
        ],
    )?;
    panel(
        e,
        "bytes per hold since the catalog",
        "bytes",
        x_max,
        &[
            (
                "database (tables + indexes)",
                series(points, |p| p.bytes_per_hold),
            ),
            ("WAL", series(points, |p| p.wal_per_hold)),
        ],
    )?;
    panel(
        f,
        "memory",
        "MiB",
        x_max,
        &[
            ("Redis read model", series(points, |p| p.redis_mb)),
            ("server RSS (largest)", series(points, |p| p.rss_max_mb)),
        ],
    )?;
    root.present()?;
    Ok(())
}

fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| group(v, decimals))
}

/// `1234567.8` as `1,234,568` (or with `decimals` places, for small figures).
fn group(v: f64, decimals: usize) -> String {
    let text = format!("{:.*}", decimals, v.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut out = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "ok",
        Some(false) => "**FAILED**",
        None => "-",
    }
}

fn table(points: &[Point]) -> String {
    let mut out = String::from(
        "| events since catalog | events in log | spread holds/s | p50 / p99 ms | invariant \
         | reads/s (p99 ms) | searches/s (p99 ms) | largest lag (events) | verify events/s \
         | rebuild events/s | bytes/hold | WAL/hold | Redis MiB | server RSS MiB | at (s) |\n\
         |---:|---:|---:|---:|:-:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in points {
        out.push_str(&format!(
            "| {} | {} | {} | {} / {} | {} | {} ({}) | {} ({}) | {} | {}{} | {} | {} | {} | {} | {} | {} |\n",
            group(p.grown, 0),
            group(p.log_events, 0),
            cell(p.spread.goodput, 0),
            cell(p.spread.p50, 1),
            cell(p.spread.p99, 1),
            verdict(p.spread.invariant_ok),
            cell(p.reads.goodput, 0),
            cell(p.reads.p99, 1),
            cell(p.search.goodput, 0),
            cell(p.search.p99, 1),
            cell(p.lag_max, 0),
            cell(p.verify, 0),
            if p.verify_ok == Some(false) { " (FAILED)" } else { "" },
            cell(p.rebuild, 0),
            cell(p.bytes_per_hold, 0),
            cell(p.wal_per_hold, 0),
            cell(p.redis_mb, 0),
            cell(p.rss_max_mb, 0),
            cell(p.elapsed, 0),
        ));
    }
    out
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("reading {}", args.input.display()))?;
    let records: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .with_context(|| format!("a line of {}", args.input.display()))?;
    let points: Vec<Point> = records
        .iter()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some("point"))
        .filter_map(point)
        .collect();
    anyhow::ensure!(!points.is_empty(), "no points in {}", args.input.display());
    let catalog = records
        .iter()
        .find(|v| v.get("kind").and_then(Value::as_str) == Some("catalog"));
    let title = match catalog {
        Some(c) => format!(
            "Cost against history: {} hotels x {} room types x {} nights ({} room-nights)",
            number(c, &["hotels"]).map_or_else(|| "?".into(), |v| group(v, 0)),
            number(c, &["room_types"]).map_or_else(|| "?".into(), |v| group(v, 0)),
            number(c, &["nights"]).map_or_else(|| "?".into(), |v| group(v, 0)),
            number(c, &["room_nights"]).map_or_else(|| "?".into(), |v| group(v, 0)),
        ),
        None => "Cost against history".to_owned(),
    };
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let svg = args.out_dir.join("scale.svg");
    draw(&svg, &title, &points)?;
    let mut md = table(&points);
    if let Some(c) = catalog {
        md.push_str(&format!(
            "\nCatalog: {} events written in {} s, the projections caught up {} s later.\n",
            number(c, &["events"]).map_or_else(|| "?".into(), |v| group(v, 0)),
            cell(number(c, &["write_seconds"]), 0),
            cell(number(c, &["projections_seconds"]), 0),
        ));
    }
    if let Some(end) = records
        .iter()
        .find(|v| v.get("kind").and_then(Value::as_str) == Some("end"))
    {
        md.push_str(&format!(
            "Whole run: {} s; server peak RSS (VmHWM) {} MiB.\n",
            cell(number(end, &["seconds"]), 0),
            cell(
                number(end, &["server_peak_rss_kb"]).map(|kb| kb / 1024.0),
                0
            ),
        ));
    }
    let table_path = args.out_dir.join("scale.md");
    std::fs::write(&table_path, &md)
        .with_context(|| format!("writing {}", table_path.display()))?;
    print!("{md}");
    println!("wrote {} and {}", svg.display(), table_path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_grouped_by_thousands() {
        assert_eq!(group(1_234_567.8, 0), "1,234,568");
        assert_eq!(group(999.0, 0), "999");
        assert_eq!(group(12.345, 1), "12.3");
        assert_eq!(group(-4_500.0, 0), "-4,500");
    }

    #[test]
    fn a_point_without_a_rebuild_draws_none() {
        let v: Value = serde_json::json!({
            "kind": "point", "grown_events": 1000000, "log_events": 10100000,
            "spread": {"goodput": 2500.0, "p50_ms": 9.0, "p99_ms": 25.0, "invariant_ok": true},
            "reads": {}, "search": {}, "verify": {"ok": true, "events_per_s": 190000.0},
            "rebuild": null, "bytes_per_hold": 6000.0
        });
        let p = point(&v).expect("a point");
        assert_eq!(p.rebuild, None);
        assert_eq!(p.verify, Some(190000.0));
        assert!(table(&[p]).contains("| 1,000,000 | 10,100,000 | 2,500 | 9.0 / 25.0 | ok |"));
    }
}
