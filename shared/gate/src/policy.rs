//! What the gate enforces, read from `manifest.eval` (and overridden by flags).

use runfn_core::InputError;
use runfn_core::error::json_type_name;
use runfn_manifest::gates::{Direction, GateKind, direction, parse_gate_key};
use serde_json::{Map, Value};

/// Where a limit came from, reported with each check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Manifest,
    NoiseFloor,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub metric: String,
    pub limit: f64,
    pub source: Source,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    /// `<metric>_min_delta`: candidate − baseline, in the metric's better direction, at least this.
    pub min_delta: Vec<Bound>,
    /// `<metric>_min`: absolute lower bounds on the candidate.
    pub min: Vec<Bound>,
    /// `<metric>_max`: absolute upper bounds on the candidate.
    pub max: Vec<Bound>,
    pub max_slice_drop: Option<f64>,
    pub min_slice_rows: Option<u64>,
    /// Columns to gate per slice (`manifest.eval.slices`); `None`: every column the baseline has.
    pub slice_columns: Option<Vec<String>>,
}

impl Policy {
    /// Reads `gates` (the object at `field`, e.g. `manifest.eval.gates`).
    pub fn from_gates(gates: &Map<String, Value>, field: &str) -> Result<Policy, InputError> {
        let mut policy = Policy::default();
        for (key, value) in gates {
            policy.set(key, value, &format!("{field}.{key}"))?;
        }
        Ok(policy)
    }

    /// Sets one gate; `field` names it in errors.
    pub fn set(&mut self, key: &str, value: &Value, field: &str) -> Result<(), InputError> {
        let kind = parse_gate_key(key).map_err(|reason| InputError::field(field, reason))?;
        let limit = value.as_f64().filter(|v| v.is_finite()).ok_or_else(|| {
            InputError::field(
                field,
                format!("must be a number, found {}", json_type_name(value)),
            )
        })?;
        let bound = |metric: String| Bound {
            metric,
            limit,
            source: Source::Manifest,
        };
        match kind {
            GateKind::MinDelta(metric) => replace(&mut self.min_delta, bound(metric)),
            GateKind::Min(metric) => replace(&mut self.min, bound(metric)),
            GateKind::Max(metric) => replace(&mut self.max, bound(metric)),
            GateKind::MaxSliceDrop if limit >= 0.0 => self.max_slice_drop = Some(limit),
            GateKind::MinSliceRows if value.as_u64().is_some() => {
                self.min_slice_rows = value.as_u64()
            }
            GateKind::MaxSliceDrop => return Err(InputError::field(field, "must be zero or more")),
            GateKind::MinSliceRows => {
                return Err(InputError::field(field, "must be a non-negative integer"));
            }
        }
        Ok(())
    }

    /// With a noise floor measured for `metric_path` (e.g. `evaluate.overall.auc`) and no explicit
    /// `<metric>_min_delta`, the candidate may fall by at most the floor.
    pub fn apply_noise_floor(&mut self, metric_path: &str, floor: f64) -> Option<&Bound> {
        let metric = metric_path.rsplit('.').next()?;
        let directional = matches!(
            direction(metric),
            Some(Direction::HigherIsBetter | Direction::LowerIsBetter)
        );
        if !directional || !floor.is_finite() || self.min_delta.iter().any(|b| b.metric == metric) {
            return None;
        }
        self.min_delta.push(Bound {
            metric: metric.to_string(),
            limit: -floor.abs(),
            source: Source::NoiseFloor,
        });
        self.min_delta.last()
    }

    /// Whether every metric tested on the rows (overall and per slice) is AUC: its test,
    /// DeLong's, is the one made on rows sorted on disk when they do not fit in memory.
    pub fn rows_tested_by_auc_alone(&self) -> bool {
        let slices = self
            .max_slice_drop
            .map(|_| self.slice_metrics())
            .unwrap_or_default();
        self.min_delta
            .iter()
            .map(|b| &b.metric)
            .chain(&slices)
            .all(|metric| metric == "auc")
    }

    /// The metrics compared per slice: those with a `_min_delta` gate, else AUC.
    pub fn slice_metrics(&self) -> Vec<String> {
        let metrics: Vec<String> = self.min_delta.iter().map(|b| b.metric.clone()).collect();
        if metrics.is_empty() {
            vec!["auc".to_string()]
        } else {
            metrics
        }
    }
}

fn replace(bounds: &mut Vec<Bound>, bound: Bound) {
    bounds.retain(|b| b.metric != bound.metric);
    bounds.push(bound);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_gates_and_refuses_unknown_ones() {
        let gates = json!({"auc_min_delta": -0.002, "max_slice_drop": 0.01, "min_slice_rows": 500, "ece_max": 0.05});
        let policy = Policy::from_gates(gates.as_object().unwrap(), "manifest.eval.gates").unwrap();
        assert_eq!(policy.min_delta[0].limit, -0.002);
        assert_eq!(policy.max_slice_drop, Some(0.01));
        assert_eq!(policy.min_slice_rows, Some(500));
        assert_eq!(policy.max[0].metric, "ece");
        let err = Policy::from_gates(json!({"auc_mni": 1}).as_object().unwrap(), "g").unwrap_err();
        assert!(err.to_string().starts_with("g.auc_mni: "), "{err}");
        let err = Policy::from_gates(json!({"max_slice_drop": "x"}).as_object().unwrap(), "g")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "g.max_slice_drop: must be a number, found a string"
        );
    }

    #[test]
    fn noise_floor_fills_only_a_missing_delta_gate() {
        let mut policy = Policy::default();
        assert_eq!(
            policy
                .apply_noise_floor("evaluate.overall.auc", 0.002)
                .map(|b| b.limit),
            Some(-0.002)
        );
        assert!(
            policy
                .apply_noise_floor("evaluate.overall.auc", 0.5)
                .is_none()
        );
        assert!(
            policy
                .apply_noise_floor("evaluate.overall.positive_rate", 0.5)
                .is_none()
        );
        assert_eq!(policy.slice_metrics(), ["auc"]);
    }
}
