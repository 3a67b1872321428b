//! Reading counters out of the server's `/metrics` (Prometheus text format).

/// The sum of every sample of `name` (all label sets); 0 when the metric is absent
/// (a counter that was never incremented is not exported).
pub fn counter(text: &str, name: &str) -> f64 {
    samples(text, name).map(|(_, value)| value).sum()
}

/// The value of `name` whose labels contain `label_value` (e.g. a projection's name).
pub fn gauge_with_label(text: &str, name: &str, label_value: &str) -> Option<f64> {
    let quoted = format!("\"{label_value}\"");
    samples(text, name)
        .find(|(labels, _)| labels.contains(&quoted))
        .map(|(_, value)| value)
}

/// `(labels, value)` of every sample line of metric `name`.
fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines().filter_map(move |line| {
        let line = line.trim();
        if line.starts_with('#') {
            return None;
        }
        let rest = line.strip_prefix(name)?;
        let (labels, value) = if let Some(labelled) = rest.strip_prefix('{') {
            let (labels, value) = labelled.split_once('}')?;
            (labels, value)
        } else if rest.starts_with(' ') {
            ("", rest)
        } else {
            // a longer metric name sharing the prefix
            return None;
        };
        let value = value.split_whitespace().next()?.parse().ok()?;
        Some((labels, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE unit_of_work_conflicts_total counter\n\
        unit_of_work_conflicts_total 12\n\
        unit_of_work_conflicts_total_extra 5\n\
        bookings_total{outcome=\"held\"} 3\n\
        bookings_total{outcome=\"sold_out\"} 4\n\
        projection_lag_events{projection=\"availability\"} 0\n\
        projection_lag_events{projection=\"audit_log\"} 17\n";

    #[test]
    fn sums_counters_and_treats_missing_as_zero() {
        assert_eq!(counter(TEXT, "unit_of_work_conflicts_total"), 12.0);
        assert_eq!(counter(TEXT, "bookings_total"), 7.0);
        assert_eq!(counter(TEXT, "unit_of_work_retries_total"), 0.0);
    }

    #[test]
    fn finds_a_gauge_by_label() {
        assert_eq!(
            gauge_with_label(TEXT, "projection_lag_events", "availability"),
            Some(0.0)
        );
        assert_eq!(
            gauge_with_label(TEXT, "projection_lag_events", "audit_log"),
            Some(17.0)
        );
        assert_eq!(gauge_with_label(TEXT, "projection_lag_events", "x"), None);
    }
}
