//! The gate's two error rates, measured on simulated nights of retraining on real tables.
//!
//! Each night has one fixed protocol (one unchanged manifest): the table is split at random into
//! test rows (30%) and a training pool; yesterday's model (the baseline) is fitted on a sample of
//! 60% of the pool, today's (the candidate) on a fresh sample of 80%. Both are honest: the same
//! kind of data, the candidate with more of it. The candidate's training noise is measured as
//! the pipeline measures it over seeds, here over three bootstrap resamples of its training rows,
//! and handed to the gate as its `noise_floor`. The same night is gated a second time with a
//! planted regression: the candidate fitted on the same rows without the table's most
//! informative column (or, on the demo's missing-new-accounts data, without the indicator that
//! says `logins_30d` was empty).
//!
//! The gate is the README's example (auc_min_delta -0.002, max_slice_drop 0.01) with the rule's
//! defaults. What is asserted, per table:
//! - honest nights blocked (all checks together): at most 1 in 10 (2 of 20);
//! - planted nights caught: at least 19 in 20 of the nights where the record says the test could
//!   detect the drop, i.e. a check's `detectable_drop` is below the drop the regression really
//!   causes there (its mean Δ over all nights).
//!
//! The models are a logistic regression (tests/logistic.rs), not runfn's MLP: hundreds of fits
//! must stay within a test's time; the gate is what is under test. GATE_NIGHTS=100 runs more
//! nights (scripts/gate-nights.sh); the default is 20.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::logistic::{Design, Model, Rng, Table, auc};
use crate::util::{testdata, tool};

const DEFAULT_NIGHTS: usize = 20;
const TEST_SHARE: f64 = 0.3;
const YESTERDAY_SHARE: f64 = 0.6;
const TODAY_SHARE: f64 = 0.8;
/// Fits whose spread stands for the candidate's training noise.
const NOISE_RESAMPLES: usize = 3;

fn nights() -> usize {
    match std::env::var("GATE_NIGHTS") {
        Ok(text) => text
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| panic!("GATE_NIGHTS={text:?} is not a number of nights")),
        Err(_) => DEFAULT_NIGHTS,
    }
}

/// The manifest every night runs under: the README's example gates, the rule's defaults.
fn manifest(slices: &[&str], seed: u64) -> Value {
    json!({
        "seed": seed,
        "eval": {
            "slices": slices,
            "gates": {"auc_min_delta": -0.002, "max_slice_drop": 0.01}
        }
    })
}

/// One table's simulation.
struct Case {
    name: &'static str,
    slices: Vec<&'static str>,
    /// Yesterday's model and today's honest one.
    design: Design,
    /// Today's model with the regression planted.
    planted: Design,
    /// What was planted, for the printout.
    planted_as: String,
    /// The check whose block counts as catching the regression (`column=value`); `None`: any.
    focus: Option<&'static str>,
}

/// One paired check of the gate's output.
#[derive(Debug, Clone)]
struct CheckRow {
    /// `overall` or `column=value`.
    place: String,
    status: String,
    delta: Option<f64>,
    se: Option<f64>,
    se_training: Option<f64>,
    p_adjusted: Option<f64>,
    rows: u64,
    positives: u64,
    detectable: Option<f64>,
}

impl CheckRow {
    fn gated(&self) -> bool {
        self.status != "undefined" && self.status != "not_gated"
    }

    fn describe(&self) -> String {
        let number = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.4}"));
        format!(
            "{} {}: Δ {} se {} se_training {} p_adjusted {} rows {} positives {} detectable_drop {}",
            self.place,
            self.status,
            self.delta
                .map_or("null".to_string(), |v| format!("{v:+.4}")),
            number(self.se),
            number(self.se_training),
            number(self.p_adjusted),
            self.rows,
            self.positives,
            number(self.detectable)
        )
    }
}

/// The gate's answer on one record.
#[derive(Debug, Clone)]
struct Verdict {
    blocked: bool,
    checks: Vec<CheckRow>,
    reasons: Vec<String>,
}

impl Verdict {
    fn check(&self, place: &str) -> Option<&CheckRow> {
        self.checks.iter().find(|c| c.place == place)
    }

    fn overall_delta(&self) -> f64 {
        self.check("overall")
            .and_then(|c| c.delta)
            .unwrap_or(f64::NAN)
    }

    fn blocked_places(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|c| c.status == "blocked")
            .map(|c| c.place.as_str())
            .collect()
    }
}

struct Night {
    honest: Verdict,
    planted: Verdict,
}

/// A candidate's scores on the test rows and its training noise (std of AUC over bootstrap
/// fits), overall and per slice.
struct Scored {
    scores: Vec<f64>,
    noise: Value,
}

fn score_with_noise(
    table: &Table,
    design: &Design,
    train: &[usize],
    test: &[usize],
    slices: &[&str],
    rng: &mut Rng,
) -> Scored {
    let scores = Model::fit(table, design, train).predict(table, test);
    let labels: Vec<bool> = test.iter().map(|&r| table.labels[r]).collect();
    let slice_values: Vec<(&str, Vec<String>)> =
        slices.iter().map(|&c| (c, table.text(c, test))).collect();
    let mut overall = Vec::new();
    let mut per_slice: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for _ in 0..NOISE_RESAMPLES {
        let resample = rng.bootstrap(train);
        let again = Model::fit(table, design, &resample).predict(table, test);
        overall.extend(auc(&again, &labels));
        for (column, values) in &slice_values {
            let mut groups: BTreeMap<&str, (Vec<f64>, Vec<bool>)> = BTreeMap::new();
            for ((value, score), label) in values.iter().zip(&again).zip(&labels) {
                let group = groups.entry(value).or_default();
                group.0.push(*score);
                group.1.push(*label);
            }
            for (value, (s, l)) in groups {
                if let Some(a) = auc(&s, &l) {
                    per_slice
                        .entry((column.to_string(), value.to_string()))
                        .or_default()
                        .push(a);
                }
            }
        }
    }
    let mut slices_json = serde_json::Map::new();
    for ((column, value), aucs) in per_slice {
        if aucs.len() == NOISE_RESAMPLES {
            let entry = slices_json
                .entry(column)
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("an object");
            let mut spread = spread(&aucs);
            spread.as_object_mut().unwrap().remove("metric");
            for key in ["method", "values"] {
                spread.as_object_mut().unwrap().remove(key);
            }
            entry.insert(value, spread);
        }
    }
    Scored {
        scores,
        noise: {
            let mut noise = spread(&overall);
            noise["slices"] = Value::Object(slices_json);
            noise
        },
    }
}

/// A `noise_floor` section as noise-floor writes it (method `range`) over `values`.
fn spread(values: &[f64]) -> Value {
    let min = values.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    json!({
        "metric": "evaluate.overall.auc",
        "n": values.len(),
        "mean": values.iter().sum::<f64>() / values.len() as f64,
        "std": sample_std(values),
        "min": min,
        "max": max,
        "range": max - min,
        "floor": max - min,
        "method": "range",
        "values": values,
    })
}

fn sample_std(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

/// Writes one model's per-row scores as evaluate does and returns its `evaluate`-shaped section.
fn evaluation(
    path: &Path,
    table: &Table,
    test: &[usize],
    scores: &[f64],
    slices: &[&str],
    rows_blake3: &str,
) -> Value {
    let labels: Vec<bool> = test.iter().map(|&r| table.labels[r]).collect();
    let file = runfn_data::row_scores::RowScores {
        split: "test".into(),
        rows_blake3: rows_blake3.to_string(),
        key_column: None,
        rows: (0..test.len() as u64).collect(),
        keys: None,
        labels: labels.clone(),
        scores: scores.to_vec(),
        slices: slices
            .iter()
            .map(|&c| (c.to_string(), table.text(c, test)))
            .collect(),
    };
    let blake3 = file.write(path).expect("row scores written");
    json!({
        "overall": {"auc": auc(scores, &labels), "rows": test.len()},
        "slices": {},
        "rows_blake3": rows_blake3,
        "row_scores": {"path": path.display().to_string(), "blake3": blake3},
    })
}

fn gate(record: &Value) -> Verdict {
    let out = tool("gate").stdin(record.to_string()).run();
    assert!(
        out.code == 0 || out.code == 1,
        "gate exited {}: {}",
        out.code,
        out.stderr
    );
    let section = out.json()["gate"].clone();
    assert_eq!(section["passed"], out.code == 0, "{section}");
    let checks = section["checks"]
        .as_array()
        .expect("gate.checks")
        .iter()
        .filter(|c| c.get("method").is_some())
        .filter(|c| c["name"] == "auc_min_delta" || c["name"] == "max_slice_drop")
        .map(|c| CheckRow {
            place: c["slice"].as_str().unwrap_or("overall").to_string(),
            status: c["status"].as_str().expect("status").to_string(),
            delta: c["delta"].as_f64(),
            se: c["se"].as_f64(),
            se_training: c["se_training"].as_f64(),
            p_adjusted: c["p_adjusted"].as_f64(),
            rows: c["rows"].as_u64().expect("rows"),
            positives: c["positives"].as_u64().expect("positives"),
            detectable: c["detectable_drop"].as_f64(),
        })
        .collect::<Vec<_>>();
    assert!(
        checks.iter().any(|c| c.place == "overall"),
        "no paired overall check: {section}"
    );
    let reasons = section["reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    Verdict {
        blocked: out.code == 1,
        checks,
        reasons,
    }
}

/// Night `k` of `case` on `table`: the honest candidate and the planted one against the same
/// baseline, each through the gate.
fn night(case: &Case, table: &Table, k: u64, dir: &Path) -> Night {
    let mut rng = Rng::new(fnv1a(case.name) ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut rows: Vec<usize> = (0..table.len()).collect();
    rng.shuffle(&mut rows);
    let (test, pool) = rows.split_at((table.len() as f64 * TEST_SHARE) as usize);
    let yesterday = rng.sample(pool, (pool.len() as f64 * YESTERDAY_SHARE) as usize);
    let today = rng.sample(pool, (pool.len() as f64 * TODAY_SHARE) as usize);
    let rows_blake3 = blake3::hash(
        &test
            .iter()
            .flat_map(|&r| (r as u64).to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .to_hex()
    .to_string();
    let folder = dir.join(format!("night-{k}"));
    std::fs::create_dir_all(&folder).unwrap();
    let slices = &case.slices;
    let baseline_scores = Model::fit(table, &case.design, &yesterday).predict(table, test);
    let baseline = evaluation(
        &folder.join("baseline.parquet"),
        table,
        test,
        &baseline_scores,
        slices,
        &rows_blake3,
    );
    let mut verdict = |design: &Design, file: &str| {
        let candidate = score_with_noise(table, design, &today, test, slices, &mut rng);
        let record = json!({
            "manifest": manifest(slices, k),
            "evaluate": evaluation(&folder.join(file), table, test, &candidate.scores, slices, &rows_blake3),
            "baseline": baseline,
            "noise_floor": candidate.noise,
        });
        gate(&record)
    };
    Night {
        honest: verdict(&case.design, "honest.parquet"),
        planted: verdict(&case.planted, "planted.parquet"),
    }
}

/// FNV-1a: a stable seed from a name, so each table's nights draw their own rows.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The column whose removal costs the most test AUC, on one fixed split: the table's most
/// informative feature. Returns it with the ranking's top three (column, AUC lost).
fn most_informative(table: &Table, design: &Design) -> (String, Vec<(String, f64)>) {
    let mut rng = Rng::new(fnv1a("most informative"));
    let mut rows: Vec<usize> = (0..table.len()).collect();
    rng.shuffle(&mut rows);
    let (test, train) = rows.split_at((table.len() as f64 * TEST_SHARE) as usize);
    let labels: Vec<bool> = test.iter().map(|&r| table.labels[r]).collect();
    let auc_of = |design: &Design| {
        auc(
            &Model::fit(table, design, train).predict(table, test),
            &labels,
        )
        .expect("both classes in the test rows")
    };
    let full = auc_of(design);
    let mut losses: Vec<(String, f64)> = design
        .columns
        .iter()
        .map(|c| (c.clone(), full - auc_of(&design.without(c))))
        .collect();
    losses.sort_by(|a, b| b.1.total_cmp(&a.1));
    losses.truncate(3);
    (losses[0].0.clone(), losses)
}

/// What a simulation found, for the printout and the assertions.
struct Tally {
    nights: usize,
    false_blocks: usize,
    /// Check → the drop the planted regression causes there (−mean Δ over the nights).
    true_drop: BTreeMap<String, f64>,
    detectable_nights: usize,
    caught_detectable: usize,
    caught_all: usize,
}

fn simulate(case: &Case, table_of_night: &dyn Fn(u64, &Path) -> Table) -> Tally {
    let n = nights();
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let results: Vec<Night> = (1..=n as u64)
        .map(|k| {
            let table = table_of_night(k, dir.path());
            night(case, &table, k, dir.path())
        })
        .collect();
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for night in &results {
        for check in &night.planted.checks {
            if let Some(d) = check.delta {
                let sum = sums.entry(check.place.clone()).or_default();
                sum.0 += d;
                sum.1 += 1;
            }
        }
    }
    let true_drop: BTreeMap<String, f64> = sums
        .into_iter()
        .map(|(place, (sum, count))| (place, -sum / count as f64))
        .collect();
    let in_focus = |c: &CheckRow| case.focus.is_none_or(|f| f == c.place);
    let detectable = |night: &Night| {
        night.planted.checks.iter().any(|c| {
            in_focus(c)
                && c.gated()
                && true_drop
                    .get(&c.place)
                    .is_some_and(|&drop| drop > 0.0 && c.detectable.is_some_and(|d| d < drop))
        })
    };
    let caught = |night: &Night| match case.focus {
        None => night.planted.blocked,
        Some(place) => night
            .planted
            .check(place)
            .is_some_and(|c| c.status == "blocked"),
    };
    let tally = Tally {
        nights: n,
        false_blocks: results.iter().filter(|r| r.honest.blocked).count(),
        detectable_nights: results.iter().filter(|r| detectable(r)).count(),
        caught_detectable: results
            .iter()
            .filter(|r| detectable(r) && caught(r))
            .count(),
        caught_all: results.iter().filter(|r| caught(r)).count(),
        true_drop: true_drop.clone(),
    };
    eprintln!(
        "{}",
        printout(case, &results, &tally, &detectable, started.elapsed())
    );
    tally
}

fn printout(
    case: &Case,
    results: &[Night],
    tally: &Tally,
    detectable: &dyn Fn(&Night) -> bool,
    took: std::time::Duration,
) -> String {
    let mut text = String::new();
    let places: Vec<String> = results[0]
        .planted
        .checks
        .iter()
        .map(|c| c.place.clone())
        .collect();
    let _ = writeln!(
        text,
        "\n== {}: {} nights; planted: {}; gate auc_min_delta -0.002, max_slice_drop 0.01 ({:.1} s)",
        case.name,
        tally.nights,
        case.planted_as,
        took.as_secs_f64()
    );
    let _ = writeln!(
        text,
        "night  honest Δ  honest blocked          planted Δ  planted blocked (detectable?)          planted detectable_drop: {}",
        places.join(", ")
    );
    for (k, night) in results.iter().enumerate() {
        let honest = night.honest.blocked_places();
        let planted = night.planted.blocked_places();
        let drops: Vec<String> = places
            .iter()
            .map(|p| {
                night
                    .planted
                    .check(p)
                    .and_then(|c| c.detectable)
                    .map_or("-".into(), |d| format!("{d:.3}"))
            })
            .collect();
        let _ = writeln!(
            text,
            "{:>5}  {:+.4}   {:<22}  {:+.4}    {:<38} {}",
            k + 1,
            night.honest.overall_delta(),
            if honest.is_empty() {
                "no".to_string()
            } else {
                honest.join(",")
            },
            night.planted.overall_delta(),
            format!(
                "{} ({})",
                if planted.is_empty() {
                    "no".to_string()
                } else {
                    planted.join(",")
                },
                if detectable(night) { "yes" } else { "no" }
            ),
            drops.join(" ")
        );
    }
    let _ = writeln!(
        text,
        "check{:<30} rows  positives  planted drop  mean detectable_drop  nights detectable  planted blocked  honest blocked",
        ""
    );
    for place in &places {
        let of = |pick: fn(&Night) -> &Verdict| -> Vec<&CheckRow> {
            results
                .iter()
                .filter_map(|r| pick(r).check(place))
                .collect()
        };
        let planted = of(|r| &r.planted);
        let honest = of(|r| &r.honest);
        let mean = |values: Vec<f64>| values.iter().sum::<f64>() / values.len().max(1) as f64;
        let drop = tally.true_drop.get(place).copied().unwrap_or(f64::NAN);
        let _ = writeln!(
            text,
            "{:<35} {:>5} {:>9}  {:>+12.4}  {:>20.4}  {:>17}  {:>15}  {:>14}",
            place,
            mean(planted.iter().map(|c| c.rows as f64).collect()).round(),
            mean(planted.iter().map(|c| c.positives as f64).collect()).round(),
            drop,
            mean(planted.iter().filter_map(|c| c.detectable).collect()),
            planted
                .iter()
                .filter(|c| c.gated() && c.detectable.is_some_and(|d| d < drop))
                .count(),
            planted.iter().filter(|c| c.status == "blocked").count(),
            honest.iter().filter(|c| c.status == "blocked").count(),
        );
    }
    let _ = writeln!(
        text,
        "{}: false blocks {}/{} honest nights; planted caught {}/{} nights where detectable ({}/{} in all){}",
        case.name,
        tally.false_blocks,
        tally.nights,
        tally.caught_detectable,
        tally.detectable_nights,
        tally.caught_all,
        tally.nights,
        case.focus
            .map_or(String::new(), |f| format!(" on the {f} check"))
    );
    for (k, night) in results.iter().enumerate() {
        if night.honest.blocked {
            let _ = writeln!(text, "  honest night {} blocked:", k + 1);
            for check in night.honest.checks.iter().filter(|c| c.status == "blocked") {
                let _ = writeln!(text, "    {}", check.describe());
            }
            for reason in &night.honest.reasons {
                let _ = writeln!(text, "    reason: {reason}");
            }
        }
        if detectable(night) && !night.planted.blocked {
            let _ = writeln!(text, "  planted night {} detectable but passed:", k + 1);
            for check in &night.planted.checks {
                let _ = writeln!(text, "    {}", check.describe());
            }
        }
    }
    text
}

/// The two error rates' assertions; each names the counts it judged.
fn assert_error_rates(case: &Case, tally: &Tally) {
    assert!(
        tally.false_blocks * 10 <= tally.nights,
        "{}: {} of {} honest nights blocked (at most 1 in 10 allowed); the blocked checks are printed above",
        case.name,
        tally.false_blocks,
        tally.nights
    );
    assert!(
        tally.caught_detectable * 20 >= tally.detectable_nights * 19,
        "{}: the planted regression ({}) was caught on {} of {} nights where the record said it was detectable (19 in 20 required); drops {:?}",
        case.name,
        case.planted_as,
        tally.caught_detectable,
        tally.detectable_nights,
        tally.true_drop
    );
}

/// Where the record never says the drop is detectable, the planted assertion holds vacuously: a
/// gate that lost its power would pass it. On this table the test must be able to see the drop.
fn assert_some_detectable(case: &Case, tally: &Tally) {
    assert!(
        tally.detectable_nights > 0,
        "{}: on no night did the record say the planted drop ({}; drops {:?}) was detectable: the planted case tests nothing",
        case.name,
        case.planted_as,
        tally.true_drop
    );
}

fn real_table(folder: &str, file: &str, label: &str) -> Table {
    let path = testdata(&format!("real/{folder}/snapshot/{file}"));
    Table::read(&[path.as_path()], label)
}

fn real_case(
    name: &'static str,
    table: &Table,
    leave_out: &[&str],
    slices: Vec<&'static str>,
) -> Case {
    let design = Design::all_but(table, leave_out);
    let (column, ranking) = most_informative(table, &design);
    let ranking: Vec<String> = ranking
        .iter()
        .map(|(c, loss)| format!("{c} {loss:+.4}"))
        .collect();
    Case {
        name,
        slices,
        planted: design.without(&column),
        design,
        planted_as: format!(
            "`{column}` left out (AUC lost on one split, top three: {})",
            ranking.join(", ")
        ),
        focus: None,
    }
}

#[test]
fn telco_nights_through_the_default_gate() {
    let table = real_table("telco", "telco.csv", "churned");
    let case = real_case(
        "telco",
        &table,
        &["customer_id"],
        vec!["contract", "internet_service"],
    );
    let tally = simulate(&case, &|_, _| table.clone());
    assert_error_rates(&case, &tally);
}

#[test]
fn email_nights_through_the_default_gate() {
    let table = real_table("email", "email.csv", "spam");
    let case = real_case(
        "email",
        &table,
        &["email_id", "time"],
        vec!["number", "format"],
    );
    let tally = simulate(&case, &|_, _| table.clone());
    assert_error_rates(&case, &tally);
    assert_some_detectable(&case, &tally);
}

const DEMO_ROWS: usize = 12_000;
const DEMO_NEW_ACCOUNTS: usize = 2400;

/// A night's demo snapshot: new customers each night (the demo seed is the night).
fn demo_table(k: u64, dir: &Path) -> Table {
    let out: PathBuf = dir.join(format!("demo-{k}"));
    let made = tool("demo-data")
        .args(["--out".as_ref(), out.as_os_str()])
        .args(["--rows", &DEMO_ROWS.to_string(), "--parts", "1"])
        .args(["--seed", &k.to_string(), "-q"])
        .args([
            "--trap-missing-new-accounts",
            &DEMO_NEW_ACCOUNTS.to_string(),
        ])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    let table = Table::read(&[out.join("part-00000.csv").as_path()], "churned");
    std::fs::remove_dir_all(&out).unwrap();
    table
}

/// The design's worked example: yesterday's model and today's honest one give empty
/// `logins_30d` (new accounts never activated, who churn more) an indicator; the planted one
/// only fills it with the mean, which hides that signal on the first-30-days slice.
#[test]
fn missing_new_accounts_nights_through_the_default_gate() {
    let first = demo_table(1, tempfile::tempdir().unwrap().path());
    let mut design = Design::all_but(
        &first,
        &[
            "customer_id",
            "signup_date",
            "tickets_as_of",
            "support_note",
            "label_date",
        ],
    );
    design.indicators = vec!["logins_30d".into()];
    let planted = Design {
        indicators: Vec::new(),
        ..design.clone()
    };
    let case = Case {
        name: "missing-new-accounts",
        slices: vec!["tenure_bucket", "tier"],
        design,
        planted,
        planted_as: "no missing indicator for logins_30d (mean fill only)".into(),
        focus: Some("tenure_bucket=<30d"),
    };
    let tally = simulate(&case, &demo_table);
    assert_error_rates(&case, &tally);
    assert_some_detectable(&case, &tally);
}
