//! The names that may appear under `manifest.eval.gates`, and which way each metric is better.

use crate::suggest;

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HigherIsBetter,
    LowerIsBetter,
    /// Neither (a rate to keep within bounds): only absolute `_min`/`_max` gates apply.
    Neutral,
}

/// The metrics `evaluate` reports, overall and per slice.
pub const METRICS: &[(&str, Direction)] = &[
    ("auc", Direction::HigherIsBetter),
    ("accuracy", Direction::HigherIsBetter),
    ("logloss", Direction::LowerIsBetter),
    ("brier", Direction::LowerIsBetter),
    ("ece", Direction::LowerIsBetter),
    ("positive_rate", Direction::Neutral),
];

pub fn direction(metric: &str) -> Option<Direction> {
    METRICS
        .iter()
        .find(|(name, _)| *name == metric)
        .map(|(_, direction)| *direction)
}

/// One gate, as named by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateKind {
    /// `<metric>_min_delta`: the candidate may not be worse than the baseline by more than this.
    MinDelta(String),
    /// `<metric>_min`: absolute lower bound on the candidate.
    Min(String),
    /// `<metric>_max`: absolute upper bound on the candidate.
    Max(String),
    /// `max_slice_drop`: no slice may get worse by more than this.
    MaxSliceDrop,
    /// `min_slice_rows`: smaller slices are reported, not gated.
    MinSliceRows,
}

/// Parses a gate key, or explains why it names no known gate.
pub fn parse_gate_key(key: &str) -> Result<GateKind, String> {
    match key {
        "max_slice_drop" => return Ok(GateKind::MaxSliceDrop),
        "min_slice_rows" => return Ok(GateKind::MinSliceRows),
        _ => {}
    }
    let parsed = if let Some(metric) = key.strip_suffix("_min_delta") {
        Some((metric, GateKind::MinDelta(metric.to_string())))
    } else if let Some(metric) = key.strip_suffix("_min") {
        Some((metric, GateKind::Min(metric.to_string())))
    } else {
        key.strip_suffix("_max")
            .map(|metric| (metric, GateKind::Max(metric.to_string())))
    };
    match parsed {
        Some((metric, kind)) => match direction(metric) {
            Some(Direction::Neutral) if matches!(kind, GateKind::MinDelta(_)) => Err(format!(
                "`{metric}` has no better direction, so `{key}` means nothing; use `{metric}_min` or `{metric}_max`"
            )),
            Some(_) => Ok(kind),
            None => Err(format!(
                "`{key}` names no known metric `{metric}`{}; known metrics: {}",
                suggest::hint(metric, &metric_names()),
                metric_names().join(", ")
            )),
        },
        None => Err(format!(
            "`{key}` is not a gate{}; gates are <metric>_min_delta, <metric>_min, <metric>_max, max_slice_drop, min_slice_rows",
            suggest::hint(
                key,
                &known_gate_keys()
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
            )
        )),
    }
}

fn metric_names() -> Vec<&'static str> {
    METRICS.iter().map(|(name, _)| *name).collect()
}

fn known_gate_keys() -> Vec<String> {
    let mut keys = vec!["max_slice_drop".to_string(), "min_slice_rows".to_string()];
    for (metric, direction) in METRICS {
        if *direction != Direction::Neutral {
            keys.push(format!("{metric}_min_delta"));
        }
        keys.push(format!("{metric}_min"));
        keys.push(format!("{metric}_max"));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_gate_form() {
        assert_eq!(
            parse_gate_key("auc_min_delta"),
            Ok(GateKind::MinDelta("auc".into()))
        );
        assert_eq!(
            parse_gate_key("logloss_max"),
            Ok(GateKind::Max("logloss".into()))
        );
        assert_eq!(
            parse_gate_key("positive_rate_min"),
            Ok(GateKind::Min("positive_rate".into()))
        );
        assert_eq!(parse_gate_key("max_slice_drop"), Ok(GateKind::MaxSliceDrop));
        assert_eq!(parse_gate_key("min_slice_rows"), Ok(GateKind::MinSliceRows));
    }

    #[test]
    fn unknown_metrics_and_gates_get_suggestions() {
        let err = parse_gate_key("acu_min_delta").unwrap_err();
        assert!(
            err.contains("no known metric `acu` (did you mean `auc`?)"),
            "{err}"
        );
        let err = parse_gate_key("max_slice_dorp").unwrap_err();
        assert!(err.contains("did you mean `max_slice_drop`"), "{err}");
        let err = parse_gate_key("positive_rate_min_delta").unwrap_err();
        assert!(err.contains("no better direction"), "{err}");
    }
}
