//! Predicted vs measured: every figure a stage assumed or predicted, beside what a later stage
//! measured, with the gap. A gap over the limit (20% by default) is flagged: the model behind the
//! prediction (ckpt-interval's checkpoint cost, a stage's usual time) no longer fits the run.

use serde::Serialize;
use serde_json::Value;

use crate::workflow::percentile;

/// What a pair compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A figure one stage predicted or assumed, against another stage's measurement.
    Prediction,
    /// A limit the measurement should stay under (the data wait of an input-bound loop).
    Limit,
    /// A stage's time in the latest run against its median over the earlier runs.
    History,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair {
    pub name: String,
    pub kind: Kind,
    /// Whose figure it is: `seed 7`, or the stage for history pairs.
    pub of: String,
    pub predicted: f64,
    pub measured: f64,
    pub unit: &'static str,
    /// `measured / predicted - 1`; null when the prediction is 0.
    pub gap: Option<f64>,
    pub flagged: bool,
    /// Where each side comes from.
    pub source: String,
}

/// The smallest difference between two times worth flagging.
const NEGLIGIBLE_S: f64 = 0.001;

impl Pair {
    fn new(
        name: &str,
        kind: Kind,
        of: &str,
        (predicted, measured): (f64, f64),
        unit: &'static str,
        source: &str,
        max_gap: f64,
    ) -> Pair {
        let gap = (predicted != 0.0).then(|| measured / predicted - 1.0);
        // Times apart by less than a millisecond are the same time as far as planning goes: a
        // 0.15 ms checkpoint copy measured at 0.19 ms is +25%, and nothing to act on.
        let negligible = unit == "s" && (measured - predicted).abs() < NEGLIGIBLE_S;
        let flagged = match kind {
            Kind::Limit => measured > predicted,
            Kind::Prediction | Kind::History => {
                !negligible && gap.is_none_or(|g| g.abs() > max_gap)
            }
        };
        Pair {
            name: name.to_string(),
            kind,
            of: of.to_string(),
            predicted,
            measured,
            unit,
            gap,
            flagged,
            source: source.to_string(),
        }
    }

    /// One line for a person: `checkpoint_write_s (seed 7): predicted 90 s, measured 0.002 s (-100%)`.
    pub fn describe(&self) -> String {
        let gap = self
            .gap
            .map_or_else(String::new, |g| format!(" ({:+.0}%)", g * 100.0));
        let verb = if self.kind == Kind::Limit {
            "limit"
        } else {
            "predicted"
        };
        format!(
            "{} ({}): {verb} {} {unit}, measured {} {unit}{gap}",
            self.name,
            self.of,
            short(self.predicted),
            short(self.measured),
            unit = self.unit,
        )
    }
}

fn short(v: f64) -> String {
    if v != 0.0 && (v.abs() < 0.001 || v.abs() >= 1e6) {
        format!("{v:.3e}")
    } else {
        format!("{}", (v * 1e4).round() / 1e4)
    }
}

/// The limits pairs are judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Largest |gap| a prediction may have before it is flagged.
    pub max_gap: f64,
    /// Largest share of a training run's time spent waiting for data before it counts as
    /// input-bound.
    pub input_bound: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_gap: 0.2,
            input_bound: 0.05,
        }
    }
}

/// The pairs of one training run: its `train` section against the `ckpt_interval` section that
/// planned it (the same record).
pub fn of_training(record: &Value, of: &str, limits: Limits) -> Vec<Pair> {
    let train = &record["train"];
    let plan = &record["ckpt_interval"];
    let num = |v: &Value| v.as_f64();
    let mut pairs = Vec::new();
    let mut push = |name, kind, values, unit, source: &str| {
        pairs.push(Pair::new(
            name,
            kind,
            of,
            values,
            unit,
            source,
            limits.max_gap,
        ));
    };
    let ckpt_mean_s = num(&train["ckpt_mean_s"]);
    // What a checkpoint cost the loop: with background writes only the copy and any wait for
    // the previous write (train.ckpt_blocking_s); with blocking saves the whole write.
    let held_s = num(&train["ckpt_blocking_s"]).or(ckpt_mean_s);
    let written = train["checkpoints_written"].as_u64().unwrap_or(0);
    let wall_s = num(&train["wall_s"]).filter(|w| *w > 0.0);
    // A run shorter than two planned intervals has no interval to measure: its checkpoints are
    // the ones every run writes (the first, the best, the last), and counting them as the plan's
    // would flag every short nightly run.
    let spans_the_plan = match (num(&plan["interval_s"]), wall_s) {
        (Some(interval), Some(wall)) => wall >= 2.0 * interval,
        _ => true,
    };
    if let (Some(cost), Some(measured)) = (num(&plan["inputs"]["cost_s"]), ckpt_mean_s) {
        push(
            "checkpoint_write_s",
            Kind::Prediction,
            (cost, measured),
            "s",
            "ckpt-interval --cost vs train.ckpt_mean_s",
        );
    }
    if let (Some(blocking), Some(measured)) = (num(&plan["inputs"]["blocking_s"]), held_s) {
        push(
            "checkpoint_blocking_s",
            Kind::Prediction,
            (blocking, measured),
            "s",
            "ckpt-interval --blocking vs train.ckpt_blocking_s",
        );
    }
    if let (Some(predicted), Some(held), Some(wall)) =
        (num(&plan["overhead_fraction"]), held_s, wall_s)
        && written > 0
        && spans_the_plan
    {
        push(
            "checkpoint_overhead",
            Kind::Prediction,
            (predicted, held * written as f64 / wall),
            "of the run",
            "ckpt-interval overhead_fraction vs train checkpoints_written x ckpt_blocking_s / wall_s",
        );
    }
    if let (Some(predicted), Some(measured)) = (
        num(&plan["inputs"]["step_time_s"]),
        num(&train["step_time_s"]),
    ) {
        push(
            "step_time_s",
            Kind::Prediction,
            (predicted, measured),
            "s",
            "ckpt-interval --step-time vs train.step_time_s",
        );
    }
    // train checkpoints every `config.ckpt_every` steps, not on the plan: a gap here says the
    // config does not follow the interval ckpt-interval worked out.
    if let (Some(interval), Some(wall)) = (num(&plan["interval_s"]), wall_s)
        && written > 0
        && spans_the_plan
    {
        push(
            "checkpoint_interval_s",
            Kind::Prediction,
            (interval, wall / written as f64),
            "s",
            "ckpt-interval interval_s vs train wall_s / checkpoints_written",
        );
    }
    if let Some(wait) = num(&train["data_wait_fraction"]) {
        push(
            "data_wait (input-bound)",
            Kind::Limit,
            (limits.input_bound, wait),
            "of the step time",
            "train.data_wait_fraction against the input-bound limit",
        );
    }
    pairs
}

/// Each stage's latest run against the median of its earlier runs, for stages with at least
/// two earlier runs: a nightly run that got slower shows here before anyone asks.
/// `runs_by_stage` holds each stage's wall times in the order the runs started.
pub fn of_history(runs_by_stage: &[(String, Vec<f64>)], limits: Limits) -> Vec<Pair> {
    runs_by_stage
        .iter()
        .filter(|(_, walls)| walls.len() >= 3)
        .map(|(stage, walls)| {
            let (latest, earlier) = walls.split_last().expect("at least three runs");
            let mut earlier = earlier.to_vec();
            earlier.sort_by(f64::total_cmp);
            Pair::new(
                "wall_s",
                Kind::History,
                stage,
                (percentile(&earlier, 0.5), *latest),
                "s",
                &format!("the median of {} earlier runs vs the latest", earlier.len()),
                limits.max_gap,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record() -> Value {
        json!({
            "ckpt_interval": {"interval_s": 100.0, "interval_steps": 500, "overhead_fraction": 0.02,
                              "inputs": {"cost_s": 2.0, "step_time_s": 0.01, "blocking_s": null}},
            "train": {"ckpt_mean_s": 2.1, "checkpoints_written": 4, "wall_s": 400.0,
                      "step_time_s": 0.0125, "data_wait_fraction": 0.08}
        })
    }

    #[test]
    fn every_pair_with_both_sides_is_made_and_judged() {
        let pairs = of_training(&record(), "seed 7", Limits::default());
        let got: Vec<(&str, bool)> = pairs.iter().map(|p| (p.name.as_str(), p.flagged)).collect();
        assert_eq!(
            got,
            [
                ("checkpoint_write_s", false),     // 2.1 vs 2: +5%
                ("checkpoint_overhead", false),    // 4 x 2.1 / 400 = 0.021 vs 0.02
                ("step_time_s", true),             // +25%
                ("checkpoint_interval_s", false),  // 400 / 4 = 100
                ("data_wait (input-bound)", true), // 8% of the step time waits for data
            ]
        );
        assert!((pairs[2].gap.unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(
            pairs[2].describe(),
            "step_time_s (seed 7): predicted 0.01 s, measured 0.0125 s (+25%)"
        );
    }

    #[test]
    fn background_checkpoints_are_judged_by_what_held_the_loop() {
        let mut r = record();
        r["train"]["ckpt_blocking_s"] = json!(0.1);
        r["ckpt_interval"]["inputs"]["blocking_s"] = json!(0.1);
        let pairs = of_training(&r, "seed 7", Limits::default());
        let find = |name: &str| pairs.iter().find(|p| p.name == name).unwrap();
        assert_eq!(find("checkpoint_write_s").measured, 2.1, "the write itself");
        assert_eq!(find("checkpoint_blocking_s").measured, 0.1);
        assert_eq!(find("checkpoint_overhead").measured, 4.0 * 0.1 / 400.0);
    }

    #[test]
    fn sub_millisecond_gaps_are_not_flagged() {
        let mut r = record();
        r["ckpt_interval"]["inputs"]["blocking_s"] = json!(0.00015);
        r["train"]["ckpt_blocking_s"] = json!(0.00019);
        let pairs = of_training(&r, "x", Limits::default());
        let blocking = pairs
            .iter()
            .find(|p| p.name == "checkpoint_blocking_s")
            .unwrap();
        assert!(blocking.gap.unwrap() > 0.2 && !blocking.flagged);
    }

    #[test]
    fn a_run_shorter_than_two_intervals_measures_no_interval() {
        let mut r = record();
        r["train"]["wall_s"] = json!(150.0);
        let names: Vec<String> = of_training(&r, "x", Limits::default())
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(
            names,
            [
                "checkpoint_write_s",
                "step_time_s",
                "data_wait (input-bound)"
            ]
        );
    }

    #[test]
    fn missing_sides_make_no_pair() {
        let mut r = record();
        r["ckpt_interval"]["interval_s"] = Value::Null;
        r["ckpt_interval"]["inputs"]["step_time_s"] = Value::Null;
        let names: Vec<String> = of_training(&r, "x", Limits::default())
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(
            names,
            [
                "checkpoint_write_s",
                "checkpoint_overhead",
                "data_wait (input-bound)"
            ]
        );
        assert!(of_training(&json!({}), "x", Limits::default()).is_empty());
    }

    #[test]
    fn history_compares_the_latest_run_with_the_earlier_median() {
        let pairs = of_history(
            &[
                ("leak-check".into(), vec![5.0, 6.0, 5.5, 9.0]),
                ("gate".into(), vec![1.0, 1.0]),
            ],
            Limits::default(),
        );
        assert_eq!(pairs.len(), 1);
        assert_eq!(
            (pairs[0].predicted, pairs[0].measured, pairs[0].flagged),
            (5.5, 9.0, true)
        );
    }
}
