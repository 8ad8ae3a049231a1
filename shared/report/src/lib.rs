//! `report`'s library: run records read back into the workflow map, predicted vs measured pairs,
//! training curves, a self-contained HTML page and TensorBoard event files.

pub mod alias;
pub mod curves;
pub mod escape;
pub mod gate;
pub mod history;
pub mod history_page;
pub mod html;
pub mod night;
pub mod outcome;
pub mod plots;
pub mod predictions;
pub mod serving;
pub mod tensorboard;
pub mod verdict;
pub mod workflow;

use std::collections::BTreeMap;

use runfn_core::InputError;
use runfn_core::timings::Rates;
use serde_json::{Map, Value, json};

use crate::curves::Curve;
use crate::predictions::{Limits, Pair};
use crate::workflow::WorkflowMap;

/// Everything the records say, read back.
#[derive(Debug, Clone)]
pub struct Report {
    /// Records read.
    pub records: usize,
    /// Pipeline runs among them (see `count_runs`).
    pub runs: usize,
    /// The record that went furthest (the most timings entries; the last of equals): the one
    /// the page's slices, gate and drift come from, and the one written to stdout.
    pub latest: Value,
    pub map: WorkflowMap,
    pub predictions: Vec<Pair>,
    /// Each training run's curves (one per `train.metrics` file), ordered by seed.
    pub curves: Vec<Curve>,
    /// Each distinct environment and the stages that ran on it.
    pub environments: Vec<(Vec<String>, Value)>,
}

impl Report {
    /// Reads the curves of every `train` section; a metrics file that cannot be read is an
    /// input error naming it (and the record's field), since the page would silently miss a seed.
    pub fn build(records: &[Value], limits: Limits) -> Result<Report, InputError> {
        let lists: Vec<(&[Value], Map<String, Value>)> = records
            .iter()
            .map(|r| {
                (
                    r["timings"].as_array().map_or(&[][..], Vec::as_slice),
                    Map::new(),
                )
            })
            .collect();
        let mut entries = runfn_core::timings::merge(&lists);
        entries.sort_by(|a, b| a["started_at"].as_str().cmp(&b["started_at"].as_str()));
        let runs = count_runs(records);
        let latest = records
            .iter()
            .enumerate()
            .max_by_key(|(i, r)| (r["timings"].as_array().map_or(0, Vec::len), *i))
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| json!({}));
        let rates = Rates::parse(latest["manifest"].get("cost"))?;
        let map = workflow::map(&entries, runs, rates.as_ref());

        let mut trained: BTreeMap<(u64, String), &Value> = BTreeMap::new();
        for record in records {
            if let Some(metrics) = record["train"]["metrics"].as_str() {
                let seed = record["train"]["seed"].as_u64().unwrap_or(u64::MAX);
                trained.entry((seed, metrics.to_string())).or_insert(record);
            }
        }
        let mut curves = Vec::new();
        let mut sources: Vec<&Value> = Vec::new();
        for ((seed, metrics), record) in &trained {
            let seed = (*seed != u64::MAX).then_some(*seed);
            // A run whose output is in a store: its metrics are staged into the local cache.
            let local = runfn_storage::local_path(metrics)?;
            let curve = Curve::read(&local, seed).map_err(|err| {
                InputError::field(
                    "train.metrics",
                    format!("{metrics}: cannot be read back ({err})"),
                )
            })?;
            sources.push(*record);
            curves.push(curve);
        }
        // Reruns train the same seeds: `seed 7 (run 2)` tells their curves apart in the legends.
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for curve in &curves {
            *seen.entry(curve.label.clone()).or_default() += 1;
        }
        let mut nth: BTreeMap<String, usize> = BTreeMap::new();
        for curve in &mut curves {
            if seen[&curve.label] > 1 {
                let n = nth.entry(curve.label.clone()).or_default();
                *n += 1;
                curve.label = format!("{} (run {n})", curve.label);
            }
        }
        let mut predictions = Vec::new();
        for (record, curve) in sources.iter().zip(&curves) {
            predictions.extend(predictions::of_training(record, &curve.label, limits));
        }
        let mut walls: Vec<(String, Vec<f64>)> = Vec::new();
        for entry in &entries {
            let stage = workflow::stage_name(entry);
            let wall = entry["wall_s"].as_f64().unwrap_or(0.0);
            match walls.iter_mut().find(|(s, _)| *s == stage) {
                Some((_, w)) => w.push(wall),
                None => walls.push((stage, vec![wall])),
            }
        }
        // Several seeds of one run are not a history: only stages seen in 3 or more runs.
        if runs >= 3 {
            predictions.extend(predictions::of_history(&walls, limits));
        }

        let mut environments: Vec<(Vec<String>, Value)> = Vec::new();
        for entry in &entries {
            let env = entry.get("environment").cloned().unwrap_or(Value::Null);
            let stage = workflow::stage_name(entry);
            match environments.iter_mut().find(|(_, e)| *e == env) {
                Some((stages, _)) if stages.contains(&stage) => {}
                Some((stages, _)) => stages.push(stage),
                None => environments.push((vec![stage], env)),
            }
        }
        Ok(Report {
            records: records.len(),
            runs,
            latest,
            map,
            predictions,
            curves,
            environments,
        })
    }

    /// The `report` section (without the files' paths, which the tool adds).
    pub fn section(&self) -> Value {
        let flagged: Vec<String> = self
            .predictions
            .iter()
            .filter(|p| p.flagged)
            .map(Pair::describe)
            .collect();
        let curves: Vec<Value> = self
            .curves
            .iter()
            .map(|c| {
                json!({
                    "label": c.label,
                    "seed": c.seed,
                    "metrics": c.metrics,
                    "steps": c.steps.last().map(|p| p.step),
                    "points": c.steps.len(),
                    "val_points": c.val.len(),
                    "checkpoints": c.checkpoints.len(),
                    "alerts": c.alerts.len(),
                })
            })
            .collect();
        json!({
            "records": self.records,
            "runs": self.runs,
            "stages": self.map.stages,
            "bottleneck": self.map.bottleneck,
            "total_wall_s": self.map.total_wall_s,
            "cost": self.map.cost,
            "predictions": self.predictions,
            "flagged": flagged,
            "curves": curves,
        })
    }
}

/// Pipeline runs among `records`: records that share a timings entry belong to one run (a
/// stage's record repeats the earlier stages' entries). Only records made from a manifest
/// (with a `manifest_hash`) count, so set-up records such as demo-data's join none; without
/// any such record, every record counts.
pub fn count_runs(records: &[Value]) -> usize {
    let made_from_manifest: Vec<&Value> = records
        .iter()
        .filter(|r| r.get("manifest_hash").is_some())
        .collect();
    let counted: Vec<&Value> = if made_from_manifest.is_empty() {
        records.iter().collect()
    } else {
        made_from_manifest
    };
    // Union-find over records, joined through the first record seen with each entry.
    let mut parent: Vec<usize> = (0..counted.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut owner: std::collections::HashMap<String, usize> = Default::default();
    for (i, record) in counted.iter().enumerate() {
        for entry in record["timings"].as_array().into_iter().flatten() {
            let key = format!("{}@{}", entry["tool"], entry["started_at"]);
            let j = *owner.entry(key).or_insert(i);
            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
            parent[a] = b;
        }
    }
    (0..counted.len())
        .filter(|&i| root(&mut parent, i) == i)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(hash: bool, entries: &[&str]) -> Value {
        let timings: Vec<Value> = entries
            .iter()
            .map(|e| json!({"tool": "t", "started_at": e}))
            .collect();
        let mut r = json!({ "timings": timings });
        if hash {
            r["manifest_hash"] = json!("h");
        }
        r
    }

    #[test]
    fn records_sharing_an_entry_are_one_run_and_set_up_records_join_none() {
        let records = [
            record(false, &["demo"]),
            record(true, &["a1"]),
            record(true, &["a1", "a2"]),
            record(true, &["a1", "a2", "a3"]),
            record(true, &["b1"]),
            record(true, &["b1", "b2"]),
        ];
        assert_eq!(count_runs(&records), 2);
        assert_eq!(count_runs(&records[..1]), 1);
        assert_eq!(count_runs(&[]), 0);
    }
}
