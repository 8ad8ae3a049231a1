//! ds-validate's drift checks on real tables (testdata/real), measured as a user would meet them.
//!
//! Honest nights: a table's rows are split at random into two halves, one profiled as the
//! previous snapshot and the other validated against it. Both halves are samples of one
//! distribution, so every validation must pass. Planted shifts: the same current half with one
//! real change (a numeric feature in other units, stops moved half a degree north, a category's
//! share moved by about ten points) must fail, on that column. A 600-row sample of telco stands
//! for a small table, where sampling noise is larger than the thresholds. Each table is halved
//! VALIDATE_HALVINGS times (default 20; scripts/validate-halves.sh runs more), each halving with
//! its own seed, and the totals are printed (`-- --nocapture`) and asserted: no honest half
//! stopped, no planted shift missed.
//!
//! Also: a drifted column that is not a feature is reported but does not fail the run unless
//! `validate.fail_on: all`, and cumulative monthly snapshots that grow pass while one that
//! shrinks fails.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::logistic::Rng;
use crate::util::{Output, testdata, tool};

const DEFAULT_HALVINGS: usize = 20;

fn halvings() -> usize {
    match std::env::var("VALIDATE_HALVINGS") {
        Ok(text) => text
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| panic!("VALIDATE_HALVINGS={text:?} is not a number of halvings")),
        Err(_) => DEFAULT_HALVINGS,
    }
}

/// A real table, parsed, with the manifest a user would write for it.
struct Table {
    name: &'static str,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    manifest: Value,
    /// Halve a random sample of this many rows instead of the whole table.
    sample: Option<usize>,
}

impl Table {
    fn read(name: &'static str, manifest: Value) -> Table {
        let path = testdata(&format!("real/{name}/snapshot/{name}.csv"));
        let mut reader = csv::Reader::from_path(&path).unwrap();
        let header = reader.headers().unwrap().iter().map(String::from).collect();
        let rows = reader
            .records()
            .map(|r| r.unwrap().iter().map(String::from).collect())
            .collect();
        Table {
            name,
            header,
            rows,
            manifest,
            sample: None,
        }
    }

    /// The table as a small one: halvings of `rows` random rows, 300 a side when 600.
    fn sampled(self, rows: usize) -> Table {
        Table {
            sample: Some(rows),
            ..self
        }
    }

    /// How the table is called in the counts.
    fn label(&self) -> String {
        match self.sample {
            Some(rows) => format!("{} ({rows} of its rows)", self.name),
            None => self.name.to_string(),
        }
    }

    fn column(&self, name: &str) -> usize {
        self.header
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("{}: no column {name}", self.name))
    }

    /// Writes `rows` as the only file of the snapshot folder `dir`.
    fn write(&self, dir: &Path, rows: &[Vec<String>]) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let mut writer = csv::Writer::from_path(dir.join(format!("{}.csv", self.name))).unwrap();
        writer.write_record(&self.header).unwrap();
        for row in rows {
            writer.write_record(row).unwrap();
        }
        writer.flush().unwrap();
        dir.to_path_buf()
    }
}

/// ds-validate on the snapshot folder `snapshot` under `manifest`, against `previous` if given,
/// saving the profile to `profile`.
fn validate(manifest: &Value, snapshot: &Path, previous: Option<&Path>, profile: &Path) -> Output {
    let mut run = tool("ds-validate")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .args(["--profile-out".as_ref(), profile.as_os_str()]);
    if let Some(previous) = previous {
        run = run.args(["--previous".as_ref(), previous.as_os_str()]);
    }
    let out = run.stdin(json!({"manifest": manifest}).to_string()).run();
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    out
}

/// The checks that fail the run: failed, unexplained, on a column that counts.
fn failing(out: &Output) -> Vec<(String, String)> {
    out.json()["validate"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false && c["fails_run"] == true && c.get("explained").is_none())
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["column"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The check `name` on `column` of a validate record.
fn check(out: &Output, name: &str, column: Option<&str>) -> Value {
    out.json()["validate"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name && c["column"].as_str() == column)
        .unwrap_or_else(|| panic!("no {name} {column:?}: {}", out.stdout))
        .clone()
}

/// A real change to one column of a half, and the checks that must catch it.
struct Plant {
    what: &'static str,
    column: &'static str,
    change: Change,
    caught_by: &'static [&'static str],
}

enum Change {
    /// Every value times this (a unit change: dollars to cents).
    Scale(f64),
    /// Every value plus this.
    Shift(f64),
    /// This share of the rows holding `from` hold `to` instead.
    Move {
        from: &'static str,
        to: &'static str,
        share: f64,
    },
}

impl Plant {
    fn apply(&self, table: &Table, rows: &[Vec<String>], rng: &mut Rng) -> Vec<Vec<String>> {
        let at = table.column(self.column);
        let number = |text: &str| text.parse::<f64>().ok();
        rows.iter()
            .map(|row| {
                let mut row = row.clone();
                let field = &mut row[at];
                match self.change {
                    Change::Scale(factor) => {
                        if let Some(v) = number(field) {
                            *field = format!("{}", v * factor);
                        }
                    }
                    Change::Shift(delta) => {
                        if let Some(v) = number(field) {
                            *field = format!("{}", v + delta);
                        }
                    }
                    Change::Move { from, to, share } => {
                        if field == from && rng.below(1_000_000) < (share * 1e6) as usize {
                            *field = to.to_string();
                        }
                    }
                }
                row
            })
            .collect()
    }
}

/// The tables, their manifests and the shifts planted in them.
fn tables() -> Vec<(Table, Vec<Plant>)> {
    let category = |what, column, from, to, share| Plant {
        what,
        column,
        change: Change::Move { from, to, share },
        caught_by: &["categorical_drift"],
    };
    let unit = |what, column| Plant {
        what,
        column,
        change: Change::Scale(100.0),
        caught_by: &["out_of_range", "numeric_drift"],
    };
    vec![
        (
            Table::read(
                "telco",
                json!({"data": {"entity": "customer_id", "label": "churned"}}),
            ),
            vec![
                unit("monthly charges in cents", "monthly_charges"),
                category(
                    "a fifth of month-to-month contracts become two-year",
                    "contract",
                    "Month-to-month",
                    "Two year",
                    0.2,
                ),
            ],
        ),
        (
            Table::read(
                "email",
                json!({"data": {"entity": "email_id", "time": "time", "label": "spam"}}),
            ),
            vec![unit("characters counted in tens of characters", "num_char")],
        ),
        (
            Table::read(
                "resume",
                json!({"data": {"entity": "job_ad_id", "label": "received_callback"}}),
            ),
            vec![unit(
                "years of experience in hundredths",
                "years_experience",
            )],
        ),
        (
            // A small table: 300 rows a side, where sampling noise is larger than the
            // thresholds. A category moved by ten points is within that noise here; one moved by
            // a third is not.
            Table::read(
                "telco",
                json!({"data": {"entity": "customer_id", "label": "churned"}}),
            )
            .sampled(600),
            vec![
                unit("monthly charges in cents", "monthly_charges"),
                category(
                    "three fifths of month-to-month contracts become two-year",
                    "contract",
                    "Month-to-month",
                    "Two year",
                    0.6,
                ),
            ],
        ),
        (
            Table::read(
                "credit",
                json!({"data": {"entity": "application_id", "label": "Status", "label_positive": "bad"}}),
            ),
            vec![unit("amounts in cents", "Amount")],
        ),
        (
            Table::read("stops", stops_manifest()),
            vec![
                Plant {
                    what: "stops half a degree north",
                    column: "lat",
                    change: Change::Shift(0.5),
                    caught_by: &["out_of_range", "numeric_drift"],
                },
                category(
                    "a fifth of traffic stops logged as suspicious",
                    "problem",
                    "traffic",
                    "suspicious",
                    0.2,
                ),
            ],
        ),
    ]
}

/// The stops table's manifest: whether the person was searched is the label, and the features
/// are listed, so the row index, the other outcomes (citationIssued, vehicleSearch) and the
/// constant MDC are not features.
fn stops_manifest() -> Value {
    json!({
        "data": {"entity": "idNum", "time": "date", "label": "personSearch", "label_positive": "YES"},
        "config": {"features": {
            "numeric": ["lat", "long", "policePrecinct"],
            "categorical": ["problem", "preRace", "race", "gender", "neighborhood"],
        }},
    })
}

#[test]
fn random_halves_pass_and_planted_shifts_fail() {
    let dir = tempfile::tempdir().unwrap();
    let halvings = halvings();
    let mut summary = Vec::new();
    let (mut stopped, mut missed) = (Vec::new(), Vec::new());
    for (index, (table, plants)) in tables().into_iter().enumerate() {
        let name = table.label();
        let (mut honest, mut planted) = (0, 0);
        for halving in 0..halvings {
            let seed = 1_000 * halving as u64 + 100 * index as u64 + 1;
            let mut rng = Rng::new(seed);
            let mut order: Vec<usize> = (0..table.rows.len()).collect();
            rng.shuffle(&mut order);
            order.truncate(table.sample.unwrap_or(order.len()));
            let (first, second) = order.split_at(order.len() / 2);
            let half = |rows: &[usize]| -> Vec<Vec<String>> {
                rows.iter().map(|&i| table.rows[i].clone()).collect()
            };
            let (previous_rows, current_rows) = (half(first), half(second));
            let here = dir.path().join(format!("{index}-{halving}"));
            let previous = here.join("previous.json");
            let out = validate(
                &table.manifest,
                &table.write(&here.join("a"), &previous_rows),
                None,
                &previous,
            );
            assert_eq!(out.code, 0, "{name} half a alone: {}", out.stderr);
            let out = validate(
                &table.manifest,
                &table.write(&here.join("b"), &current_rows),
                Some(&previous),
                &here.join("b.json"),
            );
            honest += 1;
            if out.code != 0 {
                stopped.push(format!("{name} seed {seed}: {:?}", failing(&out)));
            }
            for (i, plant) in plants.iter().enumerate() {
                let shifted = plant.apply(&table, &current_rows, &mut rng);
                let out = validate(
                    &table.manifest,
                    &table.write(&here.join(format!("p{i}")), &shifted),
                    Some(&previous),
                    &here.join(format!("p{i}.json")),
                );
                planted += 1;
                let caught = failing(&out).iter().any(|(name, column)| {
                    column == plant.column && plant.caught_by.contains(&name.as_str())
                });
                if out.code != 1 || !caught {
                    missed.push(format!(
                        "{name} seed {seed}, {}: exit {}, {:?}",
                        plant.what,
                        out.code,
                        failing(&out)
                    ));
                }
            }
            std::fs::remove_dir_all(&here).unwrap();
        }
        let count = |list: &[String]| {
            let prefix = format!("{name} seed ");
            list.iter().filter(|l| l.starts_with(&prefix)).count()
        };
        summary.push(format!(
            "{name}: {} rows a side, {} of {honest} honest halvings stopped, {} of {planted} \
             planted shifts missed",
            table.sample.unwrap_or(table.rows.len()) / 2,
            count(&stopped),
            count(&missed),
        ));
    }
    eprintln!("{}", summary.join("\n"));
    eprintln!(
        "honest halves stopped: {}; planted shifts missed: {}",
        stopped.len(),
        missed.len()
    );
    assert!(stopped.is_empty(), "honest halves stopped: {stopped:#?}");
    assert!(missed.is_empty(), "planted shifts missed: {missed:#?}");
}

/// An outcome column (vehicleSearch, recorded after the stop, not a feature) moves a lot: the
/// drift is computed and reported, marked as not failing the run, and said on stderr; with
/// `fail_on: all` the same drift fails.
#[test]
fn drift_on_a_column_that_is_not_a_feature_is_reported_not_failed() {
    let dir = tempfile::tempdir().unwrap();
    let table = Table::read("stops", stops_manifest());
    let mut rng = Rng::new(5);
    let mut order: Vec<usize> = (0..table.rows.len()).collect();
    rng.shuffle(&mut order);
    let (first, second) = order.split_at(order.len() / 2);
    let rows = |indices: &[usize]| -> Vec<Vec<String>> {
        indices.iter().map(|&i| table.rows[i].clone()).collect()
    };
    let previous = dir.path().join("previous.json");
    let out = validate(
        &table.manifest,
        &table.write(&dir.path().join("a"), &rows(first)),
        None,
        &previous,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let searched = Plant {
        what: "vehicles searched three times as often",
        column: "vehicleSearch",
        change: Change::Move {
            from: "NO",
            to: "YES",
            share: 0.15,
        },
        caught_by: &["categorical_drift"],
    };
    let snapshot = table.write(
        &dir.path().join("b"),
        &searched.apply(&table, &rows(second), &mut rng),
    );

    let out = validate(
        &table.manifest,
        &snapshot,
        Some(&previous),
        &dir.path().join("b.json"),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["validate"]["passed"], true);
    let drift = check(&out, "categorical_drift", Some("vehicleSearch"));
    assert_eq!(drift["passed"], false, "{drift}");
    assert_eq!(drift["fails_run"], false, "{drift}");
    assert!(drift["value"].as_f64().unwrap() > 0.1, "{drift}");
    assert!(
        out.stderr
            .contains("reported, not failed: categorical_drift `vehicleSearch`"),
        "{}",
        out.stderr
    );
    assert_eq!(
        check(&out, "categorical_drift", Some("problem"))["fails_run"],
        true,
        "a feature's check fails the run"
    );

    let mut all = table.manifest.clone();
    all["validate"] = json!({"fail_on": "all"});
    let out = validate(&all, &snapshot, Some(&previous), &dir.path().join("c.json"));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        failing(&out),
        [("categorical_drift".to_string(), "vehicleSearch".to_string())]
    );
    assert!(
        out.stderr
            .contains("failed: categorical_drift `vehicleSearch`"),
        "{}",
        out.stderr
    );

    let mut typo = table.manifest.clone();
    typo["validate"] = json!({"fail_on": "everything"});
    tool("ds-validate")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .stdin(json!({"manifest": typo}).to_string())
        .run()
        .assert_bad_input(
            "ds-validate",
            "manifest.validate.fail_on: \"everything\" is not one of: features, all",
        );
}

/// The stops table as a cumulative snapshot, one month longer each time (by its `date`
/// column): every month passes row_count_change against the month before, however much it
/// grew; a snapshot that lost rows fails it, by default when it lost over half, with
/// `row_count_change: 0` when it lost any; and `max_growth` limits growth when set.
#[test]
fn a_growing_cumulative_snapshot_passes_and_a_shrinking_one_fails() {
    let dir = tempfile::tempdir().unwrap();
    let table = Table::read("stops", stops_manifest());
    let date = table.column("date");
    let months: Vec<String> = (1..=12).map(|m| format!("2017-{m:02}")).collect();
    let mut profiles = Vec::new();
    let mut snapshots = Vec::new();
    for (i, month) in months.iter().enumerate() {
        // The last month also takes the stops after midnight UTC on New Year's Eve.
        let rows: Vec<Vec<String>> = table
            .rows
            .iter()
            .filter(|r| i == 11 || r[date][..7] <= month[..])
            .cloned()
            .collect();
        let snapshot = table.write(&dir.path().join(month), &rows);
        let profile = dir.path().join(format!("{month}.json"));
        let out = validate(
            &table.manifest,
            &snapshot,
            profiles.last().map(PathBuf::as_path),
            &profile,
        );
        if let Some(previous) = snapshots.last().map(|(_, n): &(PathBuf, usize)| *n) {
            let rows_check = check(&out, "row_count_change", None);
            assert_eq!(rows_check["passed"], true, "{month}: {rows_check}");
            assert_eq!(rows_check["threshold"], Value::Null, "{rows_check}");
            let growth = rows_check["value"].as_f64().unwrap();
            let expected = (rows.len() - previous) as f64 / previous as f64;
            assert!((growth - expected).abs() < 1e-12, "{month}: {rows_check}");
            // Stops grew by 125% in February and 7% in December, and the honest months pass.
            assert_eq!(out.code, 0, "{month}: {:?}", failing(&out));
        }
        profiles.push(profile);
        snapshots.push((snapshot, rows.len()));
    }
    let last = profiles.last().unwrap();

    // May's snapshot validated against December's: 54% fewer rows.
    let may = &snapshots[4].0;
    let out = validate(&table.manifest, may, Some(last), &dir.path().join("x.json"));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(failing(&out).contains(&("row_count_change".into(), String::new())));
    let shrink = check(&out, "row_count_change", None);
    assert_eq!(shrink["threshold"], 0.5, "{shrink}");
    assert!(
        shrink["detail"].as_str().unwrap().ends_with("% fewer"),
        "{shrink}"
    );

    // November's against December's: 6% fewer, within the default, not within none at all.
    let november = &snapshots[10].0;
    let out = validate(
        &table.manifest,
        november,
        Some(last),
        &dir.path().join("y.json"),
    );
    assert_eq!(check(&out, "row_count_change", None)["passed"], true);
    let mut strict = table.manifest.clone();
    strict["validate"] = json!({"row_count_change": 0});
    let out = validate(&strict, november, Some(last), &dir.path().join("z.json"));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(check(&out, "row_count_change", None)["passed"], false);

    // Opted in: February's 125% growth is over a 50% limit.
    let mut limited = table.manifest.clone();
    limited["validate"] = json!({"max_growth": 0.5});
    let out = validate(
        &limited,
        &snapshots[1].0,
        Some(&profiles[0]),
        &dir.path().join("w.json"),
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let growth = check(&out, "row_count_change", None);
    assert_eq!(
        (growth["passed"].clone(), growth["threshold"].clone()),
        (json!(false), json!(0.5))
    );
}
