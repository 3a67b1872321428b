//! `benchchart`: draws the hot scenario's strategy sweep from `loadgen run --out`
//! results (JSON lines) as an SVG: goodput against clients per strategy (with the raw-SQL
//! baseline where it was measured) and p99 latency against clients per strategy.
//!
//! ```sh
//! benchchart --input sweep.jsonl --baseline baseline.jsonl --out docs/hot-strategies.svg
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "benchchart",
    about = "Draw the hot strategy sweep as an SVG chart"
)]
struct Args {
    /// JSON lines written by `loadgen run --out` (hot runs labelled with their strategy).
    #[arg(long)]
    input: PathBuf,
    /// JSON lines with `{"kind":"baseline","workload":"hot","clients":..,"tps":..}`.
    #[arg(long)]
    baseline: Option<PathBuf>,
    #[arg(long, default_value = "docs/hot-strategies.svg")]
    out: PathBuf,
    /// A note under the title (e.g. the machine and run length).
    #[arg(long, default_value = "")]
    note: String,
}

/// (clients, goodput, p99 ms)
type Point = (u64, f64, f64);

fn read_lines(path: &PathBuf) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("a line of {}", path.display())))
        .collect()
}

fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key)
}

/// Strategies in a fixed order first, then any other label alphabetically.
fn order(label: &str) -> (usize, String) {
    let rank = ["optimistic", "pessimistic", "group"]
        .iter()
        .position(|s| *s == label)
        .unwrap_or(usize::MAX);
    (rank, label.to_owned())
}

const COLORS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut series: BTreeMap<(usize, String), Vec<Point>> = BTreeMap::new();
    for v in read_lines(&args.input)? {
        if field(&v, "kind").and_then(Value::as_str) != Some("run")
            || field(&v, "scenario").and_then(Value::as_str) != Some("hot")
        {
            continue;
        }
        let label = field(&v, "label")
            .and_then(Value::as_str)
            .unwrap_or("unlabelled");
        let (Some(clients), Some(goodput), Some(p99)) = (
            field(&v, "clients").and_then(Value::as_u64),
            field(&v, "goodput").and_then(Value::as_f64),
            field(&v, "p99_ms").and_then(Value::as_f64),
        ) else {
            continue;
        };
        let points = series.entry(order(label)).or_default();
        // A repeated point replaces the earlier one (the later run counts).
        points.retain(|p| p.0 != clients);
        points.push((clients, goodput, p99));
    }
    anyhow::ensure!(
        !series.is_empty(),
        "no hot runs in {}",
        args.input.display()
    );
    let mut baseline: Vec<(u64, f64)> = Vec::new();
    if let Some(path) = &args.baseline {
        for v in read_lines(path)? {
            if field(&v, "kind").and_then(Value::as_str) == Some("baseline")
                && field(&v, "workload").and_then(Value::as_str) == Some("hot")
            {
                if let (Some(c), Some(t)) = (
                    field(&v, "clients").and_then(Value::as_u64),
                    field(&v, "tps").and_then(Value::as_f64),
                ) {
                    baseline.retain(|b| b.0 != c);
                    baseline.push((c, t));
                }
            }
        }
    }
    let mut clients: Vec<u64> = series
        .values()
        .flatten()
        .map(|p| p.0)
        .chain(baseline.iter().map(|b| b.0))
        .collect();
    clients.sort_unstable();
    clients.dedup();
    for points in series.values_mut() {
        points.sort_by_key(|p| p.0);
    }
    baseline.sort_by_key(|b| b.0);
    draw(&args, &series, &baseline, &clients)?;
    println!("wrote {}", args.out.display());
    Ok(())
}

fn draw(
    args: &Args,
    series: &BTreeMap<(usize, String), Vec<Point>>,
    baseline: &[(u64, f64)],
    clients: &[u64],
) -> anyhow::Result<()> {
    let x_of =
        |c: u64| SegmentValue::CenterOf(clients.iter().position(|x| *x == c).unwrap_or(0) as i32);
    let x_label = |x: &SegmentValue<i32>| match x {
        SegmentValue::CenterOf(i) => usize::try_from(*i)
            .ok()
            .and_then(|i| clients.get(i))
            .map_or(String::new(), u64::to_string),
        _ => String::new(),
    };
    // Segments 0..=last, one per client count.
    let last = clients.len().saturating_sub(1) as i32;

    let root = SVGBackend::new(&args.out, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = if args.note.is_empty() {
        "Flash sale (hot scenario): write strategies over HTTP".to_owned()
    } else {
        format!(
            "Flash sale (hot scenario): write strategies over HTTP — {}",
            args.note
        )
    };
    let root = root.titled(&title, ("sans-serif", 22))?;
    let (left, right) = root.split_horizontally(600);

    // Goodput, linear.
    let top = series
        .values()
        .flatten()
        .map(|p| p.1)
        .chain(baseline.iter().map(|b| b.1))
        .fold(1.0_f64, f64::max)
        * 1.45; // headroom for the legend
    let mut chart = ChartBuilder::on(&left)
        .caption("goodput (201 holds/s)", ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0..last).into_segmented(), 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("clients")
        .y_desc("holds/s")
        .x_label_formatter(&x_label)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    for (i, ((_, label), points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|p| (x_of(p.0), p.1)),
                color.stroke_width(2),
            ))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(
            points
                .iter()
                .map(|p| Circle::new((x_of(p.0), p.1), 4, color.filled())),
        )?;
    }
    if !baseline.is_empty() {
        chart
            .draw_series(LineSeries::new(
                baseline.iter().map(|b| (x_of(b.0), b.1)),
                BLACK.stroke_width(1),
            ))?
            .label("baseline (raw SQL, pgbench)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        chart.draw_series(
            baseline
                .iter()
                .map(|b| Cross::new((x_of(b.0), b.1), 5, BLACK.stroke_width(2))),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    // p99, logarithmic: it spans milliseconds to seconds.
    let p99s: Vec<f64> = series
        .values()
        .flatten()
        .map(|p| p.2)
        .filter(|p| *p > 0.0)
        .collect();
    let low = p99s.iter().copied().fold(f64::INFINITY, f64::min);
    let high = p99s.iter().copied().fold(0.0_f64, f64::max);
    // Whole decades, so the axis is labelled at 1, 10, 100, 1000 ms.
    let (low, high) = if p99s.is_empty() {
        (1.0, 10.0)
    } else {
        (
            10_f64.powf(low.log10().floor()),
            10_f64.powf((high * 1.05).log10().ceil()),
        )
    };
    let mut chart = ChartBuilder::on(&right)
        .caption("p99 latency of successful holds", ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0..last).into_segmented(), (low..high).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("clients")
        .y_desc("ms (log scale)")
        .x_label_formatter(&x_label)
        .y_label_formatter(&|y| {
            if *y >= 10.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.1}")
            }
        })
        .draw()?;
    for (i, ((_, label), points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<_> = points
            .iter()
            .filter(|p| p.2 > 0.0)
            .map(|p| (x_of(p.0), p.2))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 4, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
