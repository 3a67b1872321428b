//! Logs (tracing) and metrics (Prometheus text at `GET /metrics`). It depends on
//! nothing else of this crate: callers name what they count.
//!
//! The metrics recorder is process-global (the `metrics` macros write to it), so it is
//! installed once and its handle shared by every `Application` in the process — which is
//! what lets the integration tests run many apps side by side.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Starts logging to stderr, filtered by `RUST_LOG` (default `info`). Safe to call twice.
pub fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's Prometheus recorder, installed on first use.
pub fn prometheus() -> PrometheusHandle {
    RECORDER
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("_seconds".into()),
                    &[
                        0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5,
                        1.0, 2.5, 5.0,
                    ],
                )
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (a test harness); then ours
            // still renders what the macros send to it... which is nothing. Log it.
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed");
            }
            handle
        })
        .clone()
}

/// Business metrics the handlers report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Metrics;

impl Metrics {
    /// Counts a hold's outcome (`bookings_total` by `outcome`): `held`, `rate_limited`,
    /// or the rejection / error code the caller names.
    pub fn booking(&self, outcome: &'static str) {
        metrics::counter!("bookings_total", "outcome" => outcome).increment(1);
    }
}
