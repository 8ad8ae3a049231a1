//! The workflow map: where the time of the runs went, stage by stage, from their `timings`
//! entries. Mapped before anything is optimized: the bottleneck is the stage with the largest
//! share of the wall time, and the quartiles show whether a stage is steady or noisy.

use runfn_core::timings::Rates;
use serde::Serialize;
use serde_json::Value;

/// The 25th, 50th and 75th percentiles of a stage's figures over its runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quartiles {
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub total: f64,
}

impl Quartiles {
    /// Percentiles by linear interpolation between closest ranks (numpy's default), so a
    /// spreadsheet or `numpy.percentile` gives the same figures.
    pub fn of(values: &[f64]) -> Quartiles {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Quartiles {
            p25: percentile(&sorted, 0.25),
            median: percentile(&sorted, 0.5),
            p75: percentile(&sorted, 0.75),
            total: sorted.iter().sum(),
        }
    }
}

pub use runfn_stats::percentile::percentile;

/// One stage of the map: one tool (an evaluate of a baseline counts apart from the candidate's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stage {
    pub stage: String,
    /// How many times the stage ran (each seed's train counts once).
    pub runs: usize,
    pub wall_s: Quartiles,
    pub cpu_s: Quartiles,
    /// The largest peak resident set of any of its runs.
    pub max_rss_bytes: u64,
    /// Its share of the wall time of everything mapped.
    pub share: f64,
    /// What its runs cost together (`manifest.cost`), when the records price it.
    pub cost: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bottleneck {
    pub stage: String,
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    pub total: f64,
    pub per_run: f64,
    pub currency: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowMap {
    pub stages: Vec<Stage>,
    pub bottleneck: Option<Bottleneck>,
    pub total_wall_s: f64,
    pub cost: Option<Cost>,
}

/// The stage an entry belongs to: its tool, with what it was run for when that is not the
/// candidate (`evaluate (baseline)`).
pub fn stage_name(entry: &Value) -> String {
    let tool = entry["tool"].as_str().unwrap_or("?");
    match entry.get("for").and_then(Value::as_str) {
        Some(role) => format!("{tool} ({role})"),
        None => tool.to_string(),
    }
}

/// The map of `entries` (each tool run once: see `runfn_core::timings::merge`) over `runs`
/// pipeline runs. `rates` prices entries that carry no `cost` of their own.
pub fn map(entries: &[Value], runs: usize, rates: Option<&Rates>) -> WorkflowMap {
    let mut order: Vec<String> = Vec::new();
    let mut by_stage: std::collections::HashMap<String, Vec<&Value>> = Default::default();
    for entry in entries {
        let name = stage_name(entry);
        if !by_stage.contains_key(&name) {
            order.push(name.clone());
        }
        by_stage.entry(name).or_default().push(entry);
    }
    let number = |entry: &Value, key: &str| entry[key].as_f64().unwrap_or(0.0);
    let total_wall_s: f64 = entries.iter().map(|e| number(e, "wall_s")).sum();
    let mut currency = None;
    let mut priced = false;
    let mut stages: Vec<Stage> = order
        .into_iter()
        .map(|name| {
            let runs_of = &by_stage[&name];
            let walls: Vec<f64> = runs_of.iter().map(|e| number(e, "wall_s")).collect();
            let cpus: Vec<f64> = runs_of.iter().map(|e| number(e, "cpu_s")).collect();
            let costs: Vec<Value> = runs_of
                .iter()
                .filter_map(|e| match e.get("cost") {
                    Some(cost @ Value::Object(_)) => Some(cost.clone()),
                    _ => rates.map(|r| r.cost_of(e)),
                })
                .collect();
            let cost = (!costs.is_empty()).then(|| {
                priced = true;
                if currency.is_none() {
                    currency = costs[0]["currency"].as_str().map(str::to_string);
                }
                costs.iter().filter_map(|c| c["total"].as_f64()).sum()
            });
            let wall_s = Quartiles::of(&walls);
            Stage {
                stage: name,
                runs: runs_of.len(),
                share: if total_wall_s > 0.0 {
                    wall_s.total / total_wall_s
                } else {
                    0.0
                },
                wall_s,
                cpu_s: Quartiles::of(&cpus),
                max_rss_bytes: runs_of
                    .iter()
                    .filter_map(|e| e["max_rss_bytes"].as_u64())
                    .max()
                    .unwrap_or(0),
                cost,
            }
        })
        .collect();
    let bottleneck = stages
        .iter()
        .max_by(|a, b| a.share.total_cmp(&b.share))
        .filter(|s| s.share > 0.0)
        .map(|s| Bottleneck {
            stage: s.stage.clone(),
            share: s.share,
        });
    let cost = priced.then(|| {
        let total: f64 = stages.iter().filter_map(|s| s.cost).sum();
        Cost {
            total,
            per_run: total / runs.max(1) as f64,
            currency: currency.unwrap_or_default(),
        }
    });
    // Largest first in the map's table would hide the pipeline's order; keep the order the
    // stages ran in, and let `bottleneck` name the largest.
    stages.shrink_to_fit();
    WorkflowMap {
        stages,
        bottleneck,
        total_wall_s,
        cost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(tool: &str, wall: f64, cpu: f64, rss: u64) -> Value {
        json!({"tool": tool, "started_at": format!("{tool}{wall}"), "wall_s": wall, "cpu_s": cpu, "max_rss_bytes": rss})
    }

    #[test]
    fn quartiles_match_numpy() {
        // numpy.percentile([1, 2, 3, 4, 10], [25, 50, 75]) == [2, 3, 4]
        let q = Quartiles::of(&[10.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((q.p25, q.median, q.p75, q.total), (2.0, 3.0, 4.0, 20.0));
        // numpy.percentile([1, 2], [25, 50, 75]) == [1.25, 1.5, 1.75]
        let q = Quartiles::of(&[2.0, 1.0]);
        assert_eq!((q.p25, q.median, q.p75), (1.25, 1.5, 1.75));
    }

    #[test]
    fn the_bottleneck_is_the_largest_share_and_stages_keep_their_order() {
        let entries = [
            entry("mf-hash", 1.0, 1.0, 10),
            entry("train", 6.0, 9.0, 300),
            entry("train", 8.0, 11.0, 200),
            entry("evaluate", 5.0, 1.0, 50),
        ];
        let map = map(&entries, 1, None);
        let names: Vec<&str> = map.stages.iter().map(|s| s.stage.as_str()).collect();
        assert_eq!(names, ["mf-hash", "train", "evaluate"]);
        let train = &map.stages[1];
        assert_eq!((train.runs, train.max_rss_bytes), (2, 300));
        assert_eq!(train.share, 0.7);
        assert_eq!(map.bottleneck.unwrap().stage, "train");
        assert_eq!(map.cost, None);
    }

    #[test]
    fn a_baseline_evaluation_is_its_own_stage_and_costs_add_up() {
        let mut baseline = entry("evaluate", 1.0, 3600.0, 1);
        baseline["for"] = json!("baseline");
        baseline["cost"] = json!({"total": 0.5, "currency": "EUR"});
        let rates = Rates::parse(Some(&json!({"core_hour": 0.25, "currency": "EUR"})))
            .unwrap()
            .unwrap();
        let map = map(
            &[entry("evaluate", 1.0, 7200.0, 1), baseline],
            2,
            Some(&rates),
        );
        assert_eq!(map.stages[1].stage, "evaluate (baseline)");
        assert_eq!(map.stages[0].cost, Some(0.5));
        assert_eq!(map.stages[1].cost, Some(0.5));
        let cost = map.cost.unwrap();
        assert_eq!(
            (cost.total, cost.per_run, cost.currency.as_str()),
            (1.0, 0.5, "EUR")
        );
    }
}
