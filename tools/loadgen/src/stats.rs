//! What one request kind (hold or read) recorded: HDR latency histograms in
//! microseconds, every status, the error codes of refusals, and where reads came from;
//! and how a run's record is written out.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::Context;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies above this are clamped (recorded as the maximum).
const HIGHEST_MICROS: u64 = 600_000_000;

pub struct KindStats {
    /// Successful responses (201 for holds, 200 for reads).
    pub ok: Histogram<u64>,
    /// Every response, whatever its status (transport errors have no latency).
    pub all: Histogram<u64>,
    pub statuses: BTreeMap<String, u64>,
    /// The `error` code of each non-2xx answer.
    pub errors: BTreeMap<String, u64>,
    /// Reads by the `source` of the answer (`cache` or `database`).
    pub sources: BTreeMap<String, u64>,
    /// What sampled answers held (searches: answers, hotels, offers, problems).
    pub sample: BTreeMap<String, u64>,
}

impl KindStats {
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            ok: Histogram::new_with_bounds(1, HIGHEST_MICROS, 3)?,
            all: Histogram::new_with_bounds(1, HIGHEST_MICROS, 3)?,
            statuses: BTreeMap::new(),
            errors: BTreeMap::new(),
            sources: BTreeMap::new(),
            sample: BTreeMap::new(),
        })
    }

    pub fn record(&mut self, status: u16, ok: bool, micros: u64) {
        let micros = micros.clamp(1, HIGHEST_MICROS);
        self.all.saturating_record(micros);
        if ok {
            self.ok.saturating_record(micros);
        }
        bump(&mut self.statuses, status.to_string());
    }

    /// A request that got no HTTP answer (`timeout` or `transport_error`).
    pub fn record_failure(&mut self, what: &str) {
        bump(&mut self.statuses, what.to_owned());
    }

    pub fn merge(&mut self, other: &KindStats) -> anyhow::Result<()> {
        self.ok.add(&other.ok)?;
        self.all.add(&other.all)?;
        for (map, from) in [
            (&mut self.statuses, &other.statuses),
            (&mut self.errors, &other.errors),
            (&mut self.sources, &other.sources),
            (&mut self.sample, &other.sample),
        ] {
            for (k, v) in from {
                *map.entry(k.clone()).or_default() += v;
            }
        }
        Ok(())
    }

    pub fn requests(&self) -> u64 {
        self.statuses.values().sum()
    }

    pub fn summary(&self, seconds: f64) -> KindSummary {
        KindSummary {
            ok: self.ok.len(),
            requests: self.requests(),
            goodput: rate(self.ok.len(), seconds),
            latency: Latency::of(&self.ok),
            all_p99_ms: ms(self.all.value_at_quantile(0.99)),
            statuses: self.statuses.clone(),
            errors: self.errors.clone(),
            sources: self.sources.clone(),
            sample: self.sample.clone(),
        }
    }
}

pub fn bump(map: &mut BTreeMap<String, u64>, key: String) {
    *map.entry(key).or_default() += 1;
}

pub fn rate(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        round2(count as f64 / seconds)
    } else {
        0.0
    }
}

fn ms(micros: u64) -> f64 {
    round2(micros as f64 / 1000.0)
}

pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Percentiles of successful requests, in milliseconds (0 when there were none).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Self {
        Self {
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct KindSummary {
    pub ok: u64,
    pub requests: u64,
    /// Successful requests per second.
    pub goodput: f64,
    #[serde(flatten)]
    pub latency: Latency,
    /// p99 over every answer, refusals included.
    pub all_p99_ms: f64,
    pub statuses: BTreeMap<String, u64>,
    pub errors: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sample: BTreeMap<String, u64>,
}

/// A run's record as one JSON line: printed when `json`, appended to `out` when given
/// (the file `scripts/bench.sh` reports from).
pub fn write_record(record: &impl Serialize, json: bool, out: Option<&Path>) -> anyhow::Result<()> {
    let line = serde_json::to_string(record)?;
    if json {
        println!("{line}");
    }
    if let Some(path) = out {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        writeln!(file, "{line}").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_summarizes() -> anyhow::Result<()> {
        let mut a = KindStats::new()?;
        let mut b = KindStats::new()?;
        for i in 1..=99 {
            a.record(201, true, i * 1000);
        }
        b.record(201, true, 100_000);
        b.record(409, false, 5_000);
        b.record_failure("timeout");
        a.merge(&b)?;
        let s = a.summary(10.0);
        assert_eq!(s.ok, 100);
        assert_eq!(s.requests, 102);
        assert_eq!(s.goodput, 10.0);
        assert_eq!(s.statuses.get("201"), Some(&100));
        assert_eq!(s.statuses.get("timeout"), Some(&1));
        assert!((s.latency.p50_ms - 50.0).abs() < 0.1);
        assert!((s.latency.max_ms - 100.0).abs() < 0.1);
        Ok(())
    }
}
