//! The optimal checkpoint interval: Young (1974) and Daly (2006), with Daly's expected waste.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Young,
    Daly,
}

impl Method {
    /// The name the record gives it.
    pub fn name(self) -> &'static str {
        match self {
            Method::Young => "young",
            Method::Daly => "daly",
        }
    }
}

/// What the interval depends on, all in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Inputs {
    /// Time to write one checkpoint.
    pub cost_s: f64,
    /// Mean time between failures of the whole job.
    pub mtbf_s: f64,
    /// Time of one training step, to express the interval in steps.
    pub step_time_s: Option<f64>,
    /// Time to restart after a failure (reschedule, load the checkpoint).
    pub restart_s: f64,
    /// For asynchronous checkpoints: the part of `cost_s` that stops training.
    pub blocking_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub young_s: f64,
    pub daly_s: f64,
    /// The chosen interval (Daly's unless Young is asked for).
    pub interval_s: f64,
    pub interval_steps: Option<u64>,
    /// Fraction of training time spent blocked on checkpoints: blocking cost / interval.
    pub overhead_fraction: f64,
    /// Restart time plus, on average, half an interval of recomputed work.
    pub expected_loss_per_failure_s: f64,
    /// Daly's expected fraction of wall time not spent on useful work (checkpoints, rework, restarts).
    pub expected_waste_fraction: f64,
    pub method: Method,
}

/// The shortest time taken seriously: a microsecond. Below it, a step time gives more steps per
/// interval than a u64 holds.
pub const MIN_SECONDS: f64 = 1e-6;
/// The longest: 10^12 s, about 31,700 years. Beyond it, `2·C·M` and `e^{(τ+C)/M}` leave the range
/// of a float and the results turn into infinities and NaN.
pub const MAX_SECONDS: f64 = 1e12;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("{name}: must be a positive number of seconds, got {}", shown(*.value))]
    NotPositive { name: String, value: f64 },
    #[error("{name}: must be zero or more seconds, got {}", shown(*.value))]
    Negative { name: String, value: f64 },
    #[error(
        "{name}: {} s is outside the sane range from {MIN_SECONDS:e} s (a microsecond) to {MAX_SECONDS:e} s (about 31,700 years)",
        shown(*.value)
    )]
    OutOfRange { name: String, value: f64 },
    #[error("these inputs give a non-finite {what}; check --cost, the MTBF and --restart")]
    NonFinite { what: &'static str },
    #[error("--blocking ({blocking}) cannot exceed --cost ({cost})")]
    BlockingAboveCost { blocking: f64, cost: f64 },
}

/// A number as people write it: `1e308` rather than 309 digits.
fn shown(value: f64) -> String {
    if value != 0.0 && value.is_finite() && !(1e-3..1e9).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// Young's first-order optimum: sqrt(2·C·M).
pub fn young(cost_s: f64, mtbf_s: f64) -> f64 {
    (2.0 * cost_s * mtbf_s).sqrt()
}

/// Daly's higher-order optimum: for C < 2M, sqrt(2CM)·[1 + (1/3)·sqrt(C/2M) + (1/9)·(C/2M)] − C,
/// otherwise M.
pub fn daly(cost_s: f64, mtbf_s: f64) -> f64 {
    if cost_s >= 2.0 * mtbf_s {
        return mtbf_s;
    }
    let ratio = cost_s / (2.0 * mtbf_s);
    young(cost_s, mtbf_s) * (1.0 + ratio.sqrt() / 3.0 + ratio / 9.0) - cost_s
}

/// Daly's (2006) expected waste for compute interval τ: 1 − τ / (M·e^{R/M}·(e^{(τ+C)/M} − 1)).
pub fn expected_waste_fraction(interval_s: f64, cost_s: f64, mtbf_s: f64, restart_s: f64) -> f64 {
    let wall_per_useful =
        mtbf_s * (restart_s / mtbf_s).exp() * ((interval_s + cost_s) / mtbf_s).exp_m1()
            / interval_s;
    1.0 - 1.0 / wall_per_useful
}

pub fn plan(inputs: &Inputs, method: Method) -> Result<Plan, InputError> {
    positive("--cost", inputs.cost_s)?;
    positive("--mtbf", inputs.mtbf_s)?;
    if let Some(step) = inputs.step_time_s {
        positive("--step-time", step)?;
    }
    if let Some(blocking) = inputs.blocking_s
        && blocking > 0.0
    {
        positive("--blocking", blocking)?;
    }
    non_negative("--restart", inputs.restart_s)?;
    if let Some(blocking) = inputs.blocking_s {
        non_negative("--blocking", blocking)?;
        if blocking > inputs.cost_s {
            return Err(InputError::BlockingAboveCost {
                blocking,
                cost: inputs.cost_s,
            });
        }
    }
    // Only the blocking part of an asynchronous checkpoint costs training time, but a new
    // checkpoint cannot start before the previous one has finished writing.
    let blocking = inputs.blocking_s.unwrap_or(inputs.cost_s);
    let shortest = if inputs.blocking_s.is_some() {
        inputs.cost_s
    } else {
        0.0
    };
    let young_s = young(blocking, inputs.mtbf_s).max(shortest);
    let daly_s = daly(blocking, inputs.mtbf_s).max(shortest);
    let interval_s = match method {
        Method::Young => young_s,
        Method::Daly => daly_s,
    };
    let plan = Plan {
        young_s,
        daly_s,
        interval_s,
        interval_steps: inputs
            .step_time_s
            .map(|step| (interval_s / step).round().max(1.0) as u64),
        overhead_fraction: blocking / interval_s,
        expected_loss_per_failure_s: inputs.restart_s + interval_s / 2.0,
        expected_waste_fraction: expected_waste_fraction(
            interval_s,
            blocking,
            inputs.mtbf_s,
            inputs.restart_s,
        ),
        method,
    };
    // The ranges above keep every result finite; this is the guarantee, stated once.
    for (what, value) in [
        ("interval", plan.interval_s),
        ("Young interval", plan.young_s),
        ("overhead", plan.overhead_fraction),
        ("loss per failure", plan.expected_loss_per_failure_s),
        ("expected waste", plan.expected_waste_fraction),
    ] {
        if !value.is_finite() {
            return Err(InputError::NonFinite { what });
        }
    }
    Ok(plan)
}

/// Checks a positive time from any source (`name` says which): finite, within the sane range.
pub fn check_positive(name: &str, value: f64) -> Result<(), InputError> {
    positive(name, value)
}

/// Mean time between failures from failure times (seconds on any common clock): the observed span
/// divided by the number of gaps.
pub fn mtbf_from_failures(times_s: &[f64]) -> Option<f64> {
    let first = times_s.iter().copied().reduce(f64::min)?;
    let last = times_s.iter().copied().reduce(f64::max)?;
    (times_s.len() >= 2 && last > first).then(|| (last - first) / (times_s.len() - 1) as f64)
}

/// A job fails when any of its nodes does: its MTBF is the per-node MTBF over the node count.
pub fn job_mtbf(node_mtbf_s: f64, nodes: u64) -> f64 {
    node_mtbf_s / nodes as f64
}

fn positive(name: &str, value: f64) -> Result<(), InputError> {
    let name = name.to_string();
    if !value.is_finite() || value <= 0.0 {
        Err(InputError::NotPositive { name, value })
    } else if !(MIN_SECONDS..=MAX_SECONDS).contains(&value) {
        Err(InputError::OutOfRange { name, value })
    } else {
        Ok(())
    }
}

fn non_negative(name: &str, value: f64) -> Result<(), InputError> {
    let name = name.to_string();
    if !value.is_finite() || value < 0.0 {
        Err(InputError::Negative { name, value })
    } else if value > MAX_SECONDS {
        Err(InputError::OutOfRange { name, value })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn inputs(cost_s: f64, mtbf_s: f64) -> Inputs {
        Inputs {
            cost_s,
            mtbf_s,
            step_time_s: None,
            restart_s: 0.0,
            blocking_s: None,
        }
    }

    #[test]
    fn young_for_90_s_checkpoints_and_12_h_mtbf() {
        let plan = plan(&inputs(90.0, 12.0 * 3600.0), Method::Young).unwrap();
        assert!(
            (plan.interval_s - 2788.5).abs() < 0.1,
            "{}",
            plan.interval_s
        );
        assert!((plan.interval_s / 60.0 - 46.5).abs() < 0.1);
        assert!(
            (plan.overhead_fraction - 0.0323).abs() < 0.0005,
            "{}",
            plan.overhead_fraction
        );
        assert!((plan.expected_loss_per_failure_s / 60.0 - 23.2).abs() < 0.1);
        // Overhead plus rework: about 3% each.
        assert!(
            (plan.expected_waste_fraction - 0.063).abs() < 0.002,
            "{}",
            plan.expected_waste_fraction
        );
    }

    #[test]
    fn dalys_own_figures() {
        for (mtbf_min, expected_min) in [(24.0 * 60.0, 116.7), (6.0 * 60.0, 56.7), (15.0, 9.14)] {
            let interval = daly(5.0 * 60.0, mtbf_min * 60.0) / 60.0;
            assert!(
                (interval - expected_min).abs() < 0.01 * expected_min,
                "M={mtbf_min} min: {interval}"
            );
        }
    }

    #[test]
    fn cost_at_least_twice_mtbf_gives_mtbf() {
        assert_eq!(daly(200.0, 100.0), 100.0);
        assert_eq!(daly(200.0, 99.0), 99.0);
    }

    #[test]
    fn asynchronous_checkpoints_count_only_the_blocking_part() {
        let sync = plan(&inputs(90.0, 43200.0), Method::Daly).unwrap();
        let asynchronous = plan(
            &Inputs {
                blocking_s: Some(10.0),
                ..inputs(90.0, 43200.0)
            },
            Method::Daly,
        )
        .unwrap();
        assert!(asynchronous.interval_s < sync.interval_s);
        assert!((asynchronous.overhead_fraction - 10.0 / asynchronous.interval_s).abs() < 1e-12);
        let never_overlapping = plan(
            &Inputs {
                blocking_s: Some(0.001),
                ..inputs(90.0, 43200.0)
            },
            Method::Daly,
        )
        .unwrap();
        assert!(never_overlapping.interval_s >= 90.0);
    }

    #[test]
    fn steps_and_restart() {
        let plan = plan(
            &Inputs {
                step_time_s: Some(0.5),
                restart_s: 120.0,
                ..inputs(90.0, 43200.0)
            },
            Method::Young,
        )
        .unwrap();
        assert_eq!(
            plan.interval_steps,
            Some((plan.interval_s / 0.5).round() as u64)
        );
        assert!((plan.expected_loss_per_failure_s - (120.0 + plan.interval_s / 2.0)).abs() < 1e-9);
    }

    #[test]
    fn bad_inputs_are_refused() {
        for (cost, mtbf) in [
            (0.0, 10.0),
            (-1.0, 10.0),
            (f64::NAN, 10.0),
            (1.0, 0.0),
            (1.0, f64::INFINITY),
        ] {
            assert!(
                plan(&inputs(cost, mtbf), Method::Daly).is_err(),
                "C={cost} M={mtbf}"
            );
        }
        let err = plan(
            &Inputs {
                blocking_s: Some(100.0),
                ..inputs(90.0, 100.0)
            },
            Method::Daly,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--blocking (100) cannot exceed --cost (90)"
        );
    }

    #[test]
    fn absurd_magnitudes_are_refused_not_turned_into_nan() {
        let err = plan(&inputs(90.0, 1e308), Method::Daly).unwrap_err();
        assert!(
            err.to_string().starts_with("--mtbf: 1e308 s is outside"),
            "{err}"
        );
        let err = plan(
            &Inputs {
                step_time_s: Some(1e-320),
                ..inputs(90.0, 43200.0)
            },
            Method::Daly,
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("--step-time: "), "{err}");
        let err = plan(
            &Inputs {
                restart_s: 1e300,
                ..inputs(90.0, 43200.0)
            },
            Method::Daly,
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("--restart: "), "{err}");
    }

    #[test]
    fn mtbf_from_observed_failures() {
        assert_eq!(mtbf_from_failures(&[0.0, 3600.0, 10800.0]), Some(5400.0));
        assert_eq!(mtbf_from_failures(&[10800.0, 0.0, 3600.0]), Some(5400.0));
        assert_eq!(mtbf_from_failures(&[5.0]), None);
        assert_eq!(mtbf_from_failures(&[5.0, 5.0]), None);
        assert_eq!(job_mtbf(86400.0 * 365.0, 365), 86400.0);
    }

    proptest! {
        #[test]
        fn every_accepted_input_gives_finite_results(
            cost in MIN_SECONDS..MAX_SECONDS, mtbf in MIN_SECONDS..MAX_SECONDS,
            step in MIN_SECONDS..MAX_SECONDS, restart in 0.0..MAX_SECONDS,
        ) {
            let inputs = Inputs { cost_s: cost, mtbf_s: mtbf, step_time_s: Some(step), restart_s: restart, blocking_s: None };
            let plan = plan(&inputs, Method::Daly).unwrap();
            prop_assert!(plan.interval_s.is_finite() && plan.interval_s > 0.0);
            prop_assert!((0.0..=1.0).contains(&plan.expected_waste_fraction));
            prop_assert!(plan.interval_steps.is_some_and(|s| (1..u64::MAX).contains(&s)));
        }

        #[test]
        fn daly_is_near_young_for_cheap_checkpoints_and_never_above_mtbf_bound(
            cost in 1.0f64..600.0, mtbf in 3600.0f64..1e7
        ) {
            let (y, d) = (young(cost, mtbf), daly(cost, mtbf));
            prop_assert!(d > 0.0);
            prop_assert!((d - y).abs() <= cost + y * 0.2);
            let waste = expected_waste_fraction(d, cost, mtbf, 0.0);
            prop_assert!(waste > 0.0 && waste < 1.0);
            // Daly's interval is (near) optimal: moving 20% either way wastes no less.
            prop_assert!(waste <= expected_waste_fraction(d * 1.2, cost, mtbf, 0.0) + 1e-12);
            prop_assert!(waste <= expected_waste_fraction(d * 0.8, cost, mtbf, 0.0) + 1e-12);
        }
    }
}
