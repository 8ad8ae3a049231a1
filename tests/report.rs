//! report: the workflow map and predicted-vs-measured pairs of real runs, the page checked in
//! headless Chromium, TensorBoard's own reader on the event files, and bad input.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::real_data::{TELCO, chain};
use crate::util::{python_with_pyarrow, testdata, tool};

/// The curves' plots; the gate's come after them (`slices`, or a paired gate's `gate_<metric>`),
/// and a later run adds `drift`.
const CURVES: [&str; 5] = ["loss", "val", "throughput", "data_wait", "checkpoint_age"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the page check in a real browser; `(exit code, stderr)`.
fn check_page(page: &Path, screenshot: &Path) -> (i32, String) {
    let out = Command::new(root().join("scripts/check-report-page.sh"))
        .arg(page)
        .arg(screenshot)
        .output()
        .expect("the page check starts");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stage<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {}", report["stages"]))
}

fn pair<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no pair {name} in {}", report["predictions"]))
}

/// (steps, losses) of a metrics.jsonl's step lines.
fn losses(metrics: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(metrics)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("alert").is_none())
        .map(|v| (v["step"].as_u64().unwrap(), v["loss"].as_f64().unwrap()))
        .collect()
}

#[test]
fn a_real_table_is_mapped_its_page_passes_a_browser_and_tensorboard_reads_its_curves() {
    let dir = tempfile::tempdir().unwrap();
    let record = chain(&TELCO, dir.path());
    let html = dir.path().join("report.html");
    let tb = dir.path().join("tb");
    let out = tool("report")
        .args([
            "--html".as_ref(),
            html.as_os_str(),
            "--tensorboard".as_ref(),
            tb.as_os_str(),
        ])
        .stdin(record.to_string())
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let written = out.json();
    let report = &written["report"];
    assert_eq!(
        written["evaluate"], record["evaluate"],
        "the record passes through"
    );

    // The map: every stage of the chain once, in the order they ran, shares adding up to 1.
    let stages: Vec<&str> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        [
            "mf-hash",
            "ds-validate",
            "leak-check",
            "shardify",
            "ckpt-interval",
            "train",
            "evaluate"
        ]
    );
    let shares: f64 = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["share"].as_f64().unwrap())
        .sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    let train_entry = record["timings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == "train")
        .unwrap();
    assert_eq!(
        stage(report, "train")["wall_s"]["median"],
        train_entry["wall_s"]
    );
    assert_eq!(
        stage(report, "train")["max_rss_bytes"],
        train_entry["max_rss_bytes"]
    );
    let largest = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .max_by(|a, b| {
            a["share"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["share"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(report["bottleneck"]["stage"], largest["stage"]);
    assert_eq!(report["runs"], 1);

    // Predicted vs measured: the plan's guessed 0.01 s checkpoint against train's measurement.
    let write = pair(report, "checkpoint_write_s");
    assert_eq!(write["predicted"], 0.01);
    assert_eq!(write["measured"], record["train"]["ckpt_mean_s"]);
    let gap = write["measured"].as_f64().unwrap() / 0.01 - 1.0;
    assert!((write["gap"].as_f64().unwrap() - gap).abs() < 1e-12);
    assert_eq!(write["flagged"], gap.abs() > 0.2);
    let step = pair(report, "step_time_s");
    assert_eq!(step["measured"], record["train"]["step_time_s"]);
    let wait = pair(report, "data_wait (input-bound)");
    assert_eq!(wait["predicted"], 0.05);
    assert_eq!(
        wait["flagged"],
        record["train"]["data_wait_fraction"].as_f64().unwrap() > 0.05
    );
    let flagged = report["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["flagged"] == true)
        .count();
    assert_eq!(report["flagged"].as_array().unwrap().len(), flagged);

    // The page: every plot the data supports, none missing in a real browser.
    assert_eq!(
        report["plots"],
        json!([&CURVES[..], &["slices"]].concat()),
        "a first run has no drift to plot"
    );
    let screenshot = dir.path().join("report.png");
    let (code, stderr) = check_page(&html, &screenshot);
    assert_eq!(code, 0, "{stderr}");
    assert!(std::fs::metadata(&screenshot).unwrap().len() > 10_000);

    // TensorBoard's own reader gets every logged loss back at its step (as float32).
    let out = Command::new(python_with_pyarrow())
        .arg(root().join("scripts/read-tensorboard.py"))
        .arg(&tb)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).unwrap();
    let seed = record["train"]["seed"].as_u64().unwrap();
    let run = &read[format!("seed-{seed}")];
    let expected = losses(Path::new(record["train"]["metrics"].as_str().unwrap()));
    let got = run["train/loss"]
        .as_array()
        .unwrap_or_else(|| panic!("no train/loss in {read}"));
    assert_eq!(got.len(), expected.len());
    for (point, (step, loss)) in got.iter().zip(&expected) {
        assert_eq!(point[0].as_u64(), Some(*step));
        assert!(
            (point[1].as_f64().unwrap() - loss).abs() <= loss.abs() * 1e-6,
            "{point} vs {loss}"
        );
    }
    let val = run["val/auc"].as_array().unwrap();
    assert_eq!(
        val.last().unwrap()[1].as_f64().map(|v| (v * 1e5).round()),
        record["train"]["val"]["auc"]
            .as_f64()
            .map(|v| (v * 1e5).round()),
        "the last validation AUC is the record's"
    );
}

/// The page of a second `make run` (a baseline and drift to show) lists every plot; the
/// browser check passes it and fails a page with a plot taken out or a script error.
#[test]
fn the_pipeline_writes_a_page_with_every_plot_and_the_browser_check_can_fail() {
    let dir = tempfile::tempdir().unwrap();
    for manifest in ["e2e/manifest.yaml", "e2e/manifest-changed.yaml"] {
        let out = crate::pipeline::make(dir.path(), manifest, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // As `make run` does after its stages: the night is kept, so the next one plans its
        // checkpoints from what this one measured.
        let kept = Command::new("make")
            // The tests run the dev build they have just made, never a release build.
            .env("BUILD_PROFILE", "dev")
            .current_dir(dir.path())
            .args(["--no-print-directory", "-f"])
            .arg(root().join("Makefile"))
            .args([
                "night-archive",
                "RUN_DIR=.",
                "MODEL=churn",
                "REGISTRY=registry",
            ])
            .output()
            .unwrap();
        assert!(
            kept.status.success(),
            "{}",
            String::from_utf8_lossy(&kept.stderr)
        );
    }
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
            .unwrap();
    let report = &record["report"];
    let mut plots: Vec<String> = CURVES.iter().map(|p| p.to_string()).collect();
    plots.extend(gate_plots(&record));
    plots.push("drift".into());
    assert_eq!(report["plots"], json!(plots));
    assert_eq!(
        record["register"]["version"], 2,
        "the report is of the second run"
    );
    assert_eq!(
        stage(report, "train")["runs"],
        2,
        "both seeds' training is mapped"
    );
    assert_eq!(stage(report, "evaluate (baseline)")["runs"], 1);
    assert_eq!(report["curves"].as_array().unwrap().len(), 2);
    // The second run planned its checkpoints from what the first one measured (the Makefile's
    // ckpt stage: ckpt-interval --measured <the first run's training, kept under nights/>).
    let plan = &record["ckpt_interval"]["inputs"];
    assert!(
        plan["cost_source"]
            .as_str()
            .is_some_and(|s| s.starts_with("measured: ") && s.contains("/nights/")),
        "{plan}"
    );
    assert_eq!(
        pair(report, "checkpoint_write_s")["predicted"],
        plan["cost_s"]
    );
    assert!(dir.path().join("tensorboard/seed-11").is_dir());

    let html = dir.path().join("report.html");
    let page = std::fs::read_to_string(&html).unwrap();
    // Self-contained: the only URL is the SVG namespace, which names and loads nothing.
    let urls = page.matches("http://").count() + page.matches("https://").count();
    let namespaces = page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    assert_eq!(urls, namespaces, "self-contained");
    let (code, stderr) = check_page(&html, &dir.path().join("ok.png"));
    assert_eq!(code, 0, "{stderr}");

    // The check fails a page whose drift plot lost its drawing, and one with a script error.
    let start = page.find("data-plot=\"drift\">").unwrap();
    let svg_start = start + page[start..].find("<svg").unwrap();
    let svg_end = svg_start + page[svg_start..].find("</svg>").unwrap() + "</svg>".len();
    let broken = dir.path().join("broken.html");
    std::fs::write(
        &broken,
        format!("{}{}", &page[..svg_start], &page[svg_end..]),
    )
    .unwrap();
    let (code, stderr) = check_page(&broken, &dir.path().join("broken.png"));
    assert_ne!(code, 0, "a missing plot passed");
    assert!(stderr.contains("drift"), "{stderr}");
    let erroring = dir.path().join("erroring.html");
    std::fs::write(
        &erroring,
        page.replace("</main>", "</main><script>null.x = 1;</script>"),
    )
    .unwrap();
    let (code, _) = check_page(&erroring, &dir.path().join("erroring.png"));
    assert_ne!(code, 0, "a page with a script error passed");
}

/// The plots a record's gate gets: a Δ plot per metric a paired gate tested (in the order of
/// its checks), else the noise floor's slices plot.
fn gate_plots(record: &Value) -> Vec<String> {
    if record["gate"]["method"] != "paired" {
        return vec!["slices".into()];
    }
    let mut plots: Vec<String> = Vec::new();
    for check in record["gate"]["checks"].as_array().unwrap() {
        let metric = check["metric"].as_str().unwrap_or("rows");
        let name = format!("gate_{metric}");
        if check.get("status").is_some() && metric != "rows" && !plots.contains(&name) {
            plots.push(name);
        }
    }
    plots
}

/// A paired gate's page draws Δ with its interval per slice for each tested metric and says in
/// words which slices were gated, underpowered and undefined; an old point gate's page keeps
/// the noise floor's plot. Both pass the browser check.
#[test]
fn a_paired_gate_draws_its_intervals_and_lists_and_an_old_point_gate_still_renders() {
    let dir = tempfile::tempdir().unwrap();
    let pages = [
        ("paired-gate.json", &["gate_auc", "gate_logloss"][..]),
        ("point-gate.json", &["slices"][..]),
    ];
    for (fixture, plots) in pages {
        let record = testdata(&format!("report/{fixture}"));
        let html = dir.path().join(fixture).with_extension("html");
        let out = tool("report")
            .args([record.as_os_str(), "--html".as_ref(), html.as_os_str()])
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        let written = out.json();
        assert_eq!(written["report"]["plots"], json!(plots), "{fixture}");
        assert_eq!(gate_plots(&written), plots, "{fixture}: the helper agrees");
        let (code, stderr) = check_page(&html, &html.with_extension("png"));
        assert_eq!(code, 0, "{fixture}: {stderr}");

        let page = std::fs::read_to_string(&html).unwrap();
        let gate = &page[page.find("<h2>Gate</h2>").unwrap()..];
        if fixture == "point-gate.json" {
            assert!(gate.contains("<th>passed</th>") && !gate.contains("Underpowered"));
            continue;
        }
        // Each interval drawn: a bar and two end caps in its status's color (green passed,
        // orange underpowered) for each of the 4 auc rows that have one.
        let auc = &page[page.find("data-plot=\"gate_auc\"").unwrap()..];
        let auc = &auc[..auc.find("</svg>").unwrap()];
        let strokes = auc
            .split("<polyline")
            .filter(|p| p.contains("stroke=\"#009E73\"") || p.contains("stroke=\"#E69F00\""))
            .count();
        assert_eq!(strokes, 4 * 3, "interval bars and caps");
        assert!(auc.contains("95% interval") && auc.contains("tier=smb (93 rows, 8 pos)"));
        for (list, words) in [
            (
                "Gated",
                "(4): overall (auc, logloss), tier=enterprise (auc, logloss)",
            ),
            (
                "Underpowered",
                "(1): tier=smb (auc, logloss) (93 rows, 8 positives;",
            ),
            ("Undefined", "(1): tier=trial (auc) (auc needs both classes"),
        ] {
            assert!(
                gate.contains(&format!("{list}</b> {words}")),
                "{list}: {gate}"
            );
        }
        assert!(gate.contains("Warned about, not gated"));
        for status in ["passed", "underpowered", "undefined", "not gated"] {
            assert!(
                gate.contains(&format!("\">{status}</td>")),
                "status {status}"
            );
        }
        assert!(
            gate.contains("[-0.0904, 0.0664]"),
            "the interval in the table"
        );
    }
}

/// Writes a metrics.jsonl of `steps` log windows and returns its path.
fn metrics_file(dir: &Path, name: &str, steps: u64) -> PathBuf {
    let path = dir.join(name);
    let lines: String = (1..=steps)
        .map(|i| {
            let mut line = json!({"step": i * 10, "loss": 1.0 / i as f64, "step_time_s": 0.01,
                                  "samples_per_s": 1000.0, "data_wait_fraction": 0.01});
            if i % 5 == 0 {
                line["val"] = json!({"auc": 0.7 + i as f64 / 100.0, "logloss": 0.5});
                line["ckpt_s"] = json!(0.02);
            }
            format!("{line}\n")
        })
        .collect();
    std::fs::write(&path, lines).unwrap();
    path
}

/// A record of one pipeline run: three stages with the given wall times.
fn run_record(dir: &Path, run: usize, walls: [f64; 3]) -> Value {
    let metrics = metrics_file(dir, &format!("metrics-{run}.jsonl"), 20);
    let timings: Vec<Value> = ["mf-hash", "train", "evaluate"]
        .iter()
        .zip(walls)
        .map(|(tool, wall)| {
            json!({"tool": tool, "started_at": format!("2026-12-0{run}T01:00:0{wall}Z"),
                   "wall_s": wall, "cpu_s": wall * 1.5, "max_rss_bytes": 1000 * run as u64,
                   "environment": {"cpu_model": "test"}})
        })
        .collect();
    json!({
        "manifest": {"run_id": "reruns", "cost": {"core_hour": 3.6, "currency": "EUR"}},
        "manifest_hash": format!("h{run}"),
        "train": {"passed": true, "seed": run, "metrics": metrics, "wall_s": walls[1],
                  "ckpt_mean_s": 0.02, "checkpoints_written": 4, "step_time_s": 0.01,
                  "data_wait_fraction": 0.01},
        "ckpt_interval": {"interval_s": 1.0, "overhead_fraction": 0.02,
                          "inputs": {"cost_s": 0.02, "step_time_s": 0.01}},
        "timings": timings,
    })
}

/// Six reruns (an even count, so the quartiles fall between runs and interpolation shows): the
/// quartiles are numpy's, the cost is priced, and the slow last run's stage is flagged against
/// the median of the earlier five.
#[test]
fn reruns_give_numpy_quartiles_a_cost_and_a_flagged_slow_stage() {
    let dir = tempfile::tempdir().unwrap();
    let trains = [4.0, 5.0, 4.5, 6.0, 5.5, 9.0];
    let records: Vec<Value> = trains
        .iter()
        .enumerate()
        .map(|(i, train)| run_record(dir.path(), i + 1, [1.0, *train, 2.0]))
        .collect();
    let input: String = records.iter().map(|r| format!("{r}\n")).collect();
    let out = tool("report").stdin(input.clone()).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = &out.json()["report"];
    assert_eq!(report["runs"], 6);
    let train = stage(report, "train");
    let numpy = Command::new(python_with_pyarrow())
        .args(["-c", "import json, sys, numpy; print(json.dumps([float(x) for x in numpy.percentile(json.loads(sys.argv[1]), [25, 50, 75])]))"])
        .arg(json!(trains).to_string())
        .output()
        .unwrap();
    assert!(
        numpy.status.success(),
        "{}",
        String::from_utf8_lossy(&numpy.stderr)
    );
    let expected: Vec<f64> = serde_json::from_slice(&numpy.stdout).unwrap();
    assert_eq!(
        [
            &train["wall_s"]["p25"],
            &train["wall_s"]["median"],
            &train["wall_s"]["p75"]
        ]
        .map(|v| v.as_f64().unwrap()),
        [expected[0], expected[1], expected[2]]
    );
    assert_eq!(train["runs"], 6);
    assert_eq!(train["max_rss_bytes"], 6000);
    // 1.5 CPU-seconds per wall second at 3.6 EUR per core-hour: 0.0015 EUR per wall second.
    let wall_total: f64 = trains.iter().sum::<f64>() + 6.0 * 3.0;
    let cost = report["cost"]["total"].as_f64().unwrap();
    assert!((cost - wall_total * 0.0015).abs() < 1e-6, "{cost}");
    assert_eq!(report["cost"]["currency"], "EUR");
    let history: Vec<&Value> = report["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "history")
        .collect();
    let slow = history.iter().find(|p| p["of"] == "train").unwrap();
    assert_eq!(
        (slow["predicted"].as_f64(), slow["measured"].as_f64()),
        (Some(5.0), Some(9.0))
    );
    assert_eq!(slow["flagged"], true);
    assert!(
        history
            .iter()
            .filter(|p| p["of"] != "train")
            .all(|p| p["flagged"] == false)
    );

    // --fail-on-flag turns the flag into exit 1, the record still on stdout.
    let out = tool("report").args(["--fail-on-flag"]).stdin(input).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.json()["report"]["flagged"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().contains("(train)"))
    );
}

#[test]
fn bad_input_is_named_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let html_arg = ["--html".as_ref(), html.as_os_str()];

    let mut missing = run_record(dir.path(), 1, [1.0, 2.0, 3.0]);
    missing["train"]["metrics"] = json!(dir.path().join("gone/metrics.jsonl"));
    let out = tool("report")
        .args(html_arg)
        .stdin(missing.to_string())
        .run();
    out.assert_bad_input("report", "train.metrics");
    assert!(!html.exists(), "no page from a failed report");

    let bad_line = run_record(dir.path(), 2, [1.0, 2.0, 3.0]);
    let path = PathBuf::from(bad_line["train"]["metrics"].as_str().unwrap());
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("\n", "\n{\"step\": oops}\n", 1);
    std::fs::write(&path, text).unwrap();
    tool("report")
        .stdin(bad_line.to_string())
        .run()
        .assert_bad_input("report", "line 2");

    let mut failed = run_record(dir.path(), 3, [1.0, 2.0, 3.0]);
    failed["gate"] = json!({"passed": false});
    tool("report")
        .stdin(failed.to_string())
        .run()
        .assert_bad_input("report", "gate");
    tool("report")
        .stdin("{\"timings\": [")
        .run()
        .assert_bad_input("report", "not valid JSON");
    tool("report")
        .stdin("")
        .run()
        .assert_bad_input("report", "");
    tool("report")
        .args(["--max-gap", "-1"])
        .stdin(run_record(dir.path(), 4, [1.0, 2.0, 3.0]).to_string())
        .run()
        .assert_bad_input("report", "--max-gap");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    tool("report")
        .args([&empty])
        .run()
        .assert_bad_input("report", "no run records");

    // In a folder, a failed.json of an earlier night is not tonight's failure, a record with a
    // failed check under another name is left out, and an earlier report's output is not read
    // again; each says so on stderr.
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let good = run_record(dir.path(), 5, [1.0, 2.0, 3.0]);
    std::fs::write(runs.join("a.json"), good.to_string()).unwrap();
    std::fs::write(runs.join("failed.json"), failed.to_string()).unwrap();
    std::fs::write(runs.join("b.json"), failed.to_string()).unwrap();
    let mut earlier = good.clone();
    earlier["report"] = json!({});
    earlier["timings"]
        .as_array_mut()
        .unwrap()
        .push(json!({"tool": "report", "started_at": "x", "wall_s": 1.0}));
    std::fs::write(runs.join("report.json"), earlier.to_string()).unwrap();
    let out = tool("report").args([&runs]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    for said in [
        "failed.json is of an earlier night",
        "b.json: left out, not this night's: a failed check (gate)",
    ] {
        assert!(out.stderr.contains(said), "{said}: {}", out.stderr);
    }
    let report = &out.json()["report"];
    assert_eq!(report["records"], 1);
    assert_eq!(
        report["nights"][0]["status"], "incomplete",
        "no failure of its own, nothing registered: never passed"
    );
}

/// Runs the page check in a real browser, asking the page to show `texts`; `(exit code, stderr)`.
fn check_page_showing(page: &Path, screenshot: &Path, texts: &[&str]) -> (i32, String) {
    let out = Command::new(root().join("scripts/check-report-page.sh"))
        .arg(page)
        .arg(screenshot)
        .args(texts)
        .output()
        .expect("the page check starts");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixture(relative: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(testdata(&format!("report/{relative}"))).unwrap())
        .unwrap()
}

/// A whole second `offset` from now (`-3 days`, `+1 minute`) as the tools write times, without
/// its milliseconds: a night's entries add theirs (`.000Z`, `.001Z`, ...).
fn utc_second(offset: &str) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", offset, "+%Y-%m-%dT%H:%M:%S"])
        .output()
        .expect("date runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The night folder's name the Makefile gives a night that started at `second`.
fn stamp(second: &str) -> String {
    format!("{}Z", second.replace(':', ""))
}

/// One night's records as make writes them: the manifest record of testdata/report/night,
/// then one record per stage, each the previous one with the stage's sections and its own
/// timings entry added (started within the night's `second`).
struct Chain {
    record: Value,
    second: String,
}

impl Chain {
    /// A night hashing the fixture's manifest and a snapshot of digest `digest`.
    fn new(second: &str, digest: &str) -> Chain {
        let mut record = fixture("night/manifest.json");
        record["mf_hash"]["data_digest"]["digest"] = json!(format!("blake3:{digest}"));
        record["timings"] = json!([]);
        let mut chain = Chain {
            record,
            second: second.to_string(),
        };
        chain.stage("mf-hash", vec![]);
        chain
    }

    /// The record of the next stage: `sections` set, `tool`'s entry appended.
    fn stage(&mut self, tool: &str, sections: Vec<(&str, Value)>) -> Value {
        for (key, section) in sections {
            self.record[key] = section;
        }
        let timings = self.record["timings"].as_array_mut().unwrap();
        let at = format!("{}.{:03}Z", self.second, timings.len());
        timings.push(
            json!({"tool": tool, "started_at": at, "wall_s": 0.25, "cpu_s": 0.5,
                            "max_rss_bytes": 1_000_000, "environment": {"cpu_model": "test"}}),
        );
        self.record.clone()
    }

    /// The stages up to the baseline's evaluation, written into `dir`: drift against
    /// `churn@<prod>` (none: the first run), the fixture's evaluation, scored against
    /// `churn@<prod>`'s when there is one.
    fn through_baseline(&mut self, dir: &Path, prod: Option<i64>) {
        let mut validate = fixture("night/validate.json")["validate"].clone();
        validate["previous_model"]["version"] = json!(prod);
        if prod.is_none() {
            validate["no_previous"] = json!("no registry at registry: the first run");
        }
        let gate = fixture("paired-gate.json");
        let mut baseline = gate["baseline"].clone();
        baseline["registered_as"] = json!(prod.map(|v| format!("churn@{v}")));
        let steps = [
            ("validate.json", "ds-validate", "validate", validate),
            (
                "leaks.json",
                "leak-check",
                "leaks",
                fixture("night/leaks.json")["leaks"].clone(),
            ),
            (
                "shards.json",
                "shardify",
                "shards",
                fixture("night/shards.json")["shards"].clone(),
            ),
            (
                "eval-seed7.json",
                "evaluate",
                "evaluate",
                gate["evaluate"].clone(),
            ),
        ];
        write_record(dir, "manifest.json", &self.record);
        for (file, tool, key, section) in steps {
            let record = self.stage(tool, vec![(key, section)]);
            write_record(dir, file, &record);
        }
        if prod.is_some() {
            let record = self.stage("evaluate", vec![("baseline", baseline)]);
            write_record(dir, "baseline.json", &record);
        } else {
            write_record(dir, "baseline.json", &self.record.clone());
        }
    }
}

fn write_record(dir: &Path, file: &str, record: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(file), format!("{record}\n")).unwrap();
}

/// The gate of the paired fixture; `blocked`: overall AUC fell by 0.03, beyond its limit.
fn gate_section(blocked: bool) -> Value {
    let mut gate = fixture("paired-gate.json")["gate"].clone();
    if blocked {
        gate["passed"] = json!(false);
        let check = gate["checks"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|c| c["name"] == "auc_min_delta")
            .unwrap();
        check["delta"] = json!(-0.03);
        check["candidate"] = json!(0.832);
        check["interval"] = json!([-0.0412, -0.0188]);
        check["bound"] = json!(-0.0206);
        check["passed"] = json!(false);
        check["status"] = json!("blocked");
        check["note"] = json!("evidence of a drop beyond the limit (p 0.0001 < 0.050)");
        gate["reasons"] = json!([
            "overall: auc went from 0.8620 to 0.8320 (-0.0300, interval [-0.0412, -0.0188], 20000 rows, 2600 positives); auc_min_delta limit >= -0.0020: evidence of a drop beyond the limit (p 0.0001 < 0.050)"
        ]);
    }
    gate
}

/// The failed.* files make leaves: the stage's record (none after exit 2), its stderr and
/// `<stage> <code>`.
fn write_failure(dir: &Path, stage: &str, code: i32, record: Option<&Value>, stderr: &str) {
    std::fs::write(
        dir.join("failed.json"),
        record.map_or_else(String::new, |r| format!("{r}\n")),
    )
    .unwrap();
    std::fs::write(dir.join("failed.err"), stderr).unwrap();
    std::fs::write(dir.join("failed.stage"), format!("{stage} {code}\n")).unwrap();
}

/// Registers model number `n` as churn's next version and promotes it to churn@prod, as the
/// register stage does (its weights a small file of its own).
fn register_model(dir: &Path, registry: &Path, n: u32) {
    let weights = dir.join(format!("weights-{n}.bin"));
    std::fs::write(&weights, format!("the weights of model {n}")).unwrap();
    let hash = blake3::hash(&std::fs::read(&weights).unwrap())
        .to_hex()
        .to_string();
    let manifest = fixture("night/manifest.json");
    let record = json!({
        "manifest": manifest["manifest"], "manifest_hash": manifest["manifest_hash"],
        "train": trained(&weights, &hash),
        "gate": passed_gate(n == 1),
    });
    let out = tool("register")
        .args(["--name", "churn", "--promote", "prod", "--registry"])
        .args([registry])
        .stdin(record.to_string())
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// A whole `train` section, as train writes it, for the weights at `weights`.
fn trained(weights: &Path, blake3: &str) -> Value {
    serde_json::to_value(runfn_schema::record::Train {
        passed: true,
        preempted: false,
        reason: None,
        weights: Some(weights.display().to_string()),
        weights_blake3: Some(blake3.to_string()),
        steps: 100,
        steps_this_run: 100,
        seed: 7,
        device: "cpu".into(),
        threads: 1,
        wall_s: 1.0,
        samples_per_s: 1000.0,
        data_wait_fraction: 0.01,
        step_time_s: 0.01,
        ckpt_mean_s: None,
        ckpt_async: false,
        ckpt_blocking_s: None,
        checkpoints_written: 0,
        resumed_from: None,
        metrics: "metrics.jsonl".into(),
        parameters: 10,
        features: Default::default(),
        final_loss: Some(0.4),
        val: None,
        best: None,
        early_stopping: None,
        shards_index_blake3: "ab".repeat(32),
        distributed: None,
        alerts: Vec::new(),
    })
    .unwrap()
}

/// A `gate` section that passed (with no baseline for the first model).
fn passed_gate(no_baseline: bool) -> Value {
    serde_json::to_value(runfn_schema::record::Gate {
        passed: true,
        no_baseline,
        gates_run: Vec::new(),
        checks: Vec::new(),
        reasons: Vec::new(),
        method: "point".into(),
        rule: None,
        confidence: None,
        resamples: None,
        underpowered: Vec::new(),
        undefined: Vec::new(),
        underpowered_drops: Vec::new(),
        unstable: Vec::new(),
        errors: None,
    })
    .unwrap()
}

/// The night's register record: `version` registered and promoted to churn@prod.
fn register_section(version: i64) -> Value {
    json!({"passed": true, "registry": "registry", "name": "churn", "version": version,
           "weights_blake3": format!("{version:064}"), "manifest_hash": fixture("night/manifest.json")["manifest_hash"],
           "promoted": "prod", "ungated_reason": null})
}

/// A folder of RUN_DIR after a night that was blocked at the gate, over the records of an
/// earlier night that passed and registered: only the blocked night is on the page, which says
/// so at the top (the stage, the failing check, the comparison, churn@prod unmoved), nothing
/// of the earlier night's gate or registration, and the browser shows it. A night that failed at
/// validate, or with bad input and no record, is told the same way.
#[test]
fn a_blocked_night_over_an_earlier_nights_records_shows_only_itself_and_that_prod_did_not_move() {
    let dir = tempfile::tempdir().unwrap();
    let (d, run, registry) = (
        dir.path(),
        dir.path().join("run"),
        dir.path().join("registry"),
    );
    register_model(d, &registry, 1);
    register_model(d, &registry, 2);

    // The earlier night: gated against v1, registered v2, its evaluation marked to be found.
    let mut earlier = Chain::new(&utc_second("-1 day"), &"a".repeat(64));
    earlier.through_baseline(&run, Some(1));
    let mut stale_gate = gate_section(false);
    stale_gate["reasons"] = json!(["the earlier night's own reason 7d41"]);
    let gated = earlier.stage("gate", vec![("gate", stale_gate)]);
    write_record(&run, "gate.json", &gated);
    let registered = earlier.stage("register", vec![("register", register_section(2))]);
    write_record(&run, "register.json", &registered);
    let earlier_page = run.join("earlier.html");
    let out = tool("report")
        .args([
            run.as_os_str(),
            "--html".as_ref(),
            earlier_page.as_os_str(),
            "--registry".as_ref(),
            registry.as_os_str(),
        ])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.json()["report"]["nights"][0]["status"],
        "passed",
        "the earlier night itself passed"
    );
    std::fs::remove_file(&earlier_page).unwrap();

    // Tonight: a new snapshot, gated against v2, blocked. make removes only gate.json (there
    // was none tonight), so the earlier night's gate.json and register.json stay.
    let mut tonight = Chain::new(&utc_second("+1 minute"), &"b".repeat(64));
    tonight.through_baseline(&run, Some(2));
    let blocked = tonight.stage("gate", vec![("gate", gate_section(true))]);
    write_failure(
        &run,
        "gate",
        1,
        Some(&blocked),
        "gate: blocked: overall: auc went from 0.8620 to 0.8320\ngate: warning: underpowered: tier=smb\n",
    );
    let page = run.join("report.html");
    let out = tool("report")
        .args([
            run.as_os_str(),
            "--html".as_ref(),
            page.as_os_str(),
            "--registry".as_ref(),
            registry.as_os_str(),
        ])
        .run();
    assert_eq!(
        out.code, 0,
        "the page is drawn, the failure not raised again: {}",
        out.stderr
    );
    for stale in ["gate.json", "register.json"] {
        assert!(
            out.stderr
                .contains(&format!("{stale}: left out, not this night's")),
            "{stale}: {}",
            out.stderr
        );
    }
    let written = out.json();
    assert_eq!(
        written["gate"]["passed"], false,
        "the record out is tonight's furthest: the blocked one"
    );
    assert!(written.get("register").is_none(), "no registration tonight");
    let night = &written["report"]["nights"][0];
    assert_eq!(
        (&night["status"], &night["decision"]),
        (&json!("blocked"), &json!("blocked"))
    );
    let stale: Vec<&str> = night["stale"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    assert_eq!(stale, ["gate.json", "register.json"]);
    let failed = &night["failed"];
    assert_eq!(
        (&failed["stage"], &failed["exit_code"], &failed["meaning"]),
        (&json!("gate"), &json!(1), &json!("a check failed"))
    );
    assert_eq!(failed["checks"][0]["name"], "auc_min_delta");
    assert_eq!(
        (
            &failed["checks"][0]["value"],
            &failed["checks"][0]["threshold"]
        ),
        (&json!(-0.03), &json!(-0.002))
    );
    assert_eq!(night["gate"]["baseline"], "churn@2");
    assert_eq!(night["gate"]["interval"], json!([-0.0412, -0.0188]));
    let prod = &night["prod"];
    assert_eq!(
        (&prod["moved"], &prod["version"], &prod["before"]),
        (&json!(false), &json!(2), &json!(2))
    );
    assert_eq!(
        prod["summary"],
        "churn@prod did not move: it is version 2, as when the night began"
    );
    assert_eq!(
        written["report"]["records"], 7,
        "tonight's 6 records and its failed stage's"
    );

    let html = std::fs::read_to_string(&page).unwrap();
    let verdict = &html[html.find("<section class=\"verdict").unwrap()..];
    let verdict = &verdict[..verdict.find("</section>").unwrap()];
    for words in [
        "<h2>BLOCKED at gate (exit 1: a check failed)</h2>",
        "<td class=\"text\">auc_min_delta</td><td class=\"text\">overall</td><td>-0.03</td><td>&gt;= -0.002</td>",
        "gate: blocked: overall: auc went from 0.8620 to 0.8320",
        "Δ auc -0.0300 [-0.0412, -0.0188] (95%), limit &gt;= -0.0020, candidate vs baseline churn@2",
        "churn@prod did not move: it is version 2, as when the night began",
    ] {
        assert!(
            verdict.contains(words),
            "{words} missing from the verdict: {verdict}"
        );
    }
    assert!(html.contains(
        "<title>runfn report: churn-e2e: BLOCKED at gate (exit 1: a check failed)</title>"
    ));
    // The page's own script names every verdict word; the page before it must not.
    let shown = &html[..html.find("<script>").unwrap()];
    for earlier_nights in ["7d41", "PASSED", "registered</span>", "churn v2"] {
        assert!(
            !shown.contains(earlier_nights),
            "the page shows the earlier night's {earlier_nights}"
        );
    }
    let (code, stderr) = check_page_showing(
        &page,
        &d.join("blocked.png"),
        &[
            "BLOCKED at gate (exit 1: a check failed)",
            "auc_min_delta",
            "churn@prod did not move",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("verdict: BLOCKED at gate"), "{stderr}");

    // The browser check fails a page whose verdict is hidden, says passed, or lacks the why.
    let hidden = d.join("hidden.html");
    std::fs::write(
        &hidden,
        html.replace("</head>", "<style>#verdict{display:none}</style></head>"),
    )
    .unwrap();
    let (code, stderr) =
        check_page_showing(&hidden, &d.join("hidden.png"), &["churn@prod did not move"]);
    assert_ne!(code, 0, "a hidden verdict passed");
    assert!(
        stderr.contains("verdict 1 (blocked) is not visible")
            && stderr.contains("does not show \"churn@prod did not move\""),
        "{stderr}"
    );
    let lying = d.join("lying.html");
    std::fs::write(
        &lying,
        html.replace("<h2>BLOCKED at gate", "<h2>PASSED at gate"),
    )
    .unwrap();
    let (code, stderr) = check_page_showing(&lying, &d.join("lying.png"), &[]);
    assert_ne!(code, 0, "a blocked night shown as passed passed");
    assert!(stderr.contains("should start with \"BLOCKED\""), "{stderr}");

    // Failed at validate instead (exit 1): nothing after the manifest record is tonight's.
    let other = d.join("validate-run");
    let mut earlier = Chain::new(&utc_second("-1 day"), &"a".repeat(64));
    earlier.through_baseline(&other, Some(1));
    write_record(
        &other,
        "register.json",
        &earlier.stage("register", vec![("register", register_section(2))]),
    );
    let mut tonight = Chain::new(&utc_second("+1 minute"), &"c".repeat(64));
    write_record(&other, "manifest.json", &tonight.record.clone());
    let mut validate = fixture("night/validate.json")["validate"].clone();
    validate["passed"] = json!(false);
    validate["previous_model"]["version"] = json!(2);
    validate["checks"][1] = json!({"name": "row_count_change", "column": null, "value": 0.6,
        "threshold": 0.5, "passed": false, "detail": "8000 rows, previously 20000"});
    let failed = tonight.stage("ds-validate", vec![("validate", validate)]);
    write_failure(
        &other,
        "validate",
        1,
        Some(&failed),
        "ds-validate: failed: row_count_change: 0.6000 > 0.5 (8000 rows, previously 20000)\n",
    );
    let page = other.join("report.html");
    let out = tool("report")
        .args([
            other.as_os_str(),
            "--html".as_ref(),
            page.as_os_str(),
            "--registry".as_ref(),
            registry.as_os_str(),
            "--model".as_ref(),
            "churn".as_ref(),
        ])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let night = &out.json()["report"]["nights"][0];
    assert_eq!(night["records"], json!(["manifest.json"]));
    assert_eq!(
        night["stale"].as_array().unwrap().len(),
        6,
        "{}",
        night["stale"]
    );
    assert_eq!(
        night["gate"],
        Value::Null,
        "the earlier night's gate is not tonight's"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for words in [
        "<h2>FAILED at validate (exit 1: a check failed)</h2>",
        "<td class=\"text\">row_count_change</td><td class=\"text\">-</td><td>0.6</td><td>0.5</td><td class=\"text wrap\">8000 rows, previously 20000</td>",
        "churn@prod did not move: it is version 2, as when the night began",
    ] {
        assert!(html.contains(words), "{words} missing");
    }
    assert!(
        !html.contains("<h2>Gate</h2>") && !html.contains("test AUC"),
        "no earlier night's gate or evaluation"
    );

    // Bad input at the gate (exit 2): no record, the tool's one line is the why.
    let bare = d.join("bare-run");
    let mut tonight = Chain::new(&utc_second("+1 minute"), &"d".repeat(64));
    tonight.through_baseline(&bare, Some(2));
    write_failure(
        &bare,
        "gate",
        2,
        None,
        "gate: baseline.row_scores.path: no such file\n",
    );
    let out = tool("report")
        .args([
            bare.as_os_str(),
            "--registry".as_ref(),
            registry.as_os_str(),
        ])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let night = &out.json()["report"]["nights"][0];
    assert_eq!(
        (&night["status"], &night["failed"]["meaning"]),
        (&json!("failed"), &json!("bad usage or input"))
    );
    assert_eq!(
        night["summary"],
        "FAILED at gate (exit 2: bad usage or input): gate: baseline.row_scores.path: no such file. \
         churn@prod did not move: it is version 2, as when the night began"
    );
}

/// `report history`'s output, read back with every field named (an unknown one fails).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryOut {
    history: HistorySection,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HistorySection {
    alias: Option<String>,
    registry: Option<String>,
    registry_found: bool,
    registry_error: Option<String>,
    version: Option<i64>,
    drawn_at: String,
    nights: Vec<HistoryNight>,
    versions: Vec<Value>,
    moves: Vec<Value>,
    html: Option<String>,
    plots: Vec<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryNight {
    night: String,
    dir: String,
    date: String,
    started_at: Option<String>,
    status: String,
    decision: String,
    summary: String,
    manifest_hash: Option<String>,
    snapshot: Value,
    splits: Vec<Value>,
    drift: Vec<Value>,
    leaks: Vec<Value>,
    gate: Option<Value>,
    registered: Option<Value>,
    alias: AliasChange,
    failed: Option<Value>,
    stale: usize,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasChange {
    moved: bool,
    from: Option<i64>,
    to: Option<i64>,
    stayed: Option<i64>,
    by_hand: Vec<Value>,
    words: String,
}

/// Four nights kept as make keeps them (RUN_DIR/nights/<stamp>/, each with whatever records
/// the run folder held, earlier nights' included): the first model, a promotion, a night the
/// gate blocked, a night that failed at validate; then @prod rolled back by hand. The history
/// says each night's decision and what @prod did, from the registry, with the gate's Δ, its
/// interval and the baseline compared, and draws them in a browser-checked page.
#[test]
fn a_history_of_four_nights_has_each_nights_decision_and_alias_move() {
    let dir = tempfile::tempdir().unwrap();
    let (d, registry) = (dir.path(), dir.path().join("registry"));
    let nights = d.join("run/nights");
    let seconds: Vec<String> = ["-4 days", "-3 days", "-2 days", "-1 day"]
        .iter()
        .map(|o| utc_second(o))
        .collect();
    let folder = |i: usize| nights.join(stamp(&seconds[i]));

    // Night 1: nothing serves; the first model becomes churn@prod version 1.
    let mut chain = Chain::new(&seconds[0], &"1".repeat(64));
    chain.through_baseline(&folder(0), None);
    let first_gate = json!({"passed": true, "no_baseline": true, "method": "point", "gates_run": [],
                            "checks": [], "reasons": [], "underpowered": [], "undefined": []});
    write_record(
        &folder(0),
        "gate.json",
        &chain.stage("gate", vec![("gate", first_gate)]),
    );
    write_record(
        &folder(0),
        "register.json",
        &chain.stage("register", vec![("register", register_section(1))]),
    );
    register_model(d, &registry, 1);

    // Night 2: gated against version 1 and promoted.
    let mut chain = Chain::new(&seconds[1], &"2".repeat(64));
    chain.through_baseline(&folder(1), Some(1));
    write_record(
        &folder(1),
        "gate.json",
        &chain.stage("gate", vec![("gate", gate_section(false))]),
    );
    let night2 = chain.stage("register", vec![("register", register_section(2))]);
    write_record(&folder(1), "register.json", &night2);
    register_model(d, &registry, 2);

    // Night 3: gated against version 2 and blocked; night 2's gate and registration copied
    // along.
    let mut chain = Chain::new(&seconds[2], &"3".repeat(64));
    chain.through_baseline(&folder(2), Some(2));
    write_record(&folder(2), "gate.json", &night2);
    write_record(&folder(2), "register.json", &night2);
    let blocked = chain.stage("gate", vec![("gate", gate_section(true))]);
    write_failure(
        &folder(2),
        "gate",
        1,
        Some(&blocked),
        "gate: blocked: overall: auc fell\n",
    );

    // Night 4: the snapshot shrank; region's drift was explained, the row count's was not.
    let mut chain = Chain::new(&seconds[3], &"4".repeat(64));
    write_record(&folder(3), "manifest.json", &chain.record.clone());
    for file in [
        "validate.json",
        "leaks.json",
        "shards.json",
        "eval-seed7.json",
        "baseline.json",
    ] {
        std::fs::copy(folder(2).join(file), folder(3).join(file)).unwrap();
    }
    let mut validate = fixture("night/validate.json")["validate"].clone();
    validate["passed"] = json!(false);
    validate["previous_model"]["version"] = json!(2);
    validate["checks"][1] = json!({"name": "row_count_change", "column": null, "value": 0.6,
        "threshold": 0.5, "passed": false, "detail": "8000 rows, previously 20000"});
    validate["checks"][4] = json!({"name": "categorical_drift", "column": "region", "value": 0.12,
        "threshold": 0.05, "passed": false, "explained": "campaign in central",
        "explained_until": "2026-12-31"});
    let failed = chain.stage("ds-validate", vec![("validate", validate)]);
    write_failure(
        &folder(3),
        "validate",
        1,
        Some(&failed),
        "ds-validate: failed: row_count_change\n",
    );

    // After night 4 began, someone rolled churn@prod back by hand.
    let out = tool("register")
        .args([
            "alias",
            "churn@prod",
            "1",
            "--reason",
            "roll back: v2 mis-scores new regions",
            "--registry",
        ])
        .args([&registry])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);

    let page = d.join("history.html");
    let mut dirs: Vec<PathBuf> = (0..4).map(folder).collect();
    dirs.reverse();
    let out = tool("report").arg_history(&dirs, &registry, &page).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("2 record(s) left out, not this night's"),
        "{}",
        out.stderr
    );
    let history: HistoryOut = serde_json::from_str(&out.stdout).expect("the history's schema");
    let h = history.history;
    assert_eq!(h.alias.as_deref(), Some("churn@prod"));
    assert!(h.registry_found && h.registry_error.is_none() && h.registry.is_some());
    assert_eq!(h.version, Some(1), "rolled back");
    assert!(
        h.drawn_at.ends_with('Z') && h.drawn_at.len() == 20,
        "{}",
        h.drawn_at
    );
    assert_eq!(h.plots, ["nights"]);
    assert_eq!(h.html.as_deref(), Some(page.to_str().unwrap()));
    let names: Vec<String> = (0..4).map(|i| stamp(&seconds[i])).collect();
    assert_eq!(
        h.nights.iter().map(|n| &n.night).collect::<Vec<_>>(),
        names.iter().collect::<Vec<_>>(),
        "in the folders' order"
    );
    let decisions: Vec<&str> = h.nights.iter().map(|n| n.decision.as_str()).collect();
    assert_eq!(decisions, ["first_model", "promoted", "blocked", "failed"]);
    let statuses: Vec<&str> = h.nights.iter().map(|n| n.status.as_str()).collect();
    assert_eq!(statuses, ["passed", "passed", "blocked", "failed"]);
    let moves: Vec<[Option<i64>; 3]> = h
        .nights
        .iter()
        .map(|n| [n.alias.from, n.alias.to, n.alias.stayed])
        .collect();
    assert_eq!(
        moves,
        [
            [None, Some(1), None],
            [Some(1), Some(2), None],
            [None, None, Some(2)],
            [None, None, Some(2)]
        ]
    );
    let moved: Vec<bool> = h.nights.iter().map(|n| n.alias.moved).collect();
    assert_eq!(moved, [true, true, false, false]);
    assert!(h.nights[..3].iter().all(|n| n.alias.by_hand.is_empty()));
    assert_eq!(h.nights[3].alias.by_hand.len(), 1);
    assert_eq!(
        h.nights[3].alias.by_hand[0]["reason"],
        "roll back: v2 mis-scores new regions"
    );
    assert!(
        h.nights[3]
            .alias
            .words
            .starts_with("unchanged (version 2); by hand: version 2 → version 1 at "),
        "{}",
        h.nights[3].alias.words
    );
    assert_eq!(
        h.nights[2].stale, 2,
        "night 2's gate and registration in night 3's folder"
    );

    // What each night read, found and compared.
    let n1 = &h.nights[0];
    assert!(
        n1.date.ends_with(" UTC") && n1.started_at.as_deref().unwrap().starts_with(&seconds[0])
    );
    assert_eq!(n1.snapshot["digest"], format!("blake3:{}", "1".repeat(64)));
    assert_eq!(n1.snapshot["rows"], 20000);
    assert_eq!(
        n1.splits,
        [
            json!({"split": "test", "rows": 2600, "after": null, "until": null}),
            json!({"split": "train", "rows": 16038, "after": null, "until": null}),
            json!({"split": "val", "rows": 1362, "after": null, "until": null})
        ]
    );
    assert_eq!(n1.gate.as_ref().unwrap()["no_baseline"], true);
    let gate2 = n1
        .gate
        .as_ref()
        .map(|_| h.nights[1].gate.as_ref().unwrap())
        .unwrap();
    assert_eq!(
        (&gate2["delta"], &gate2["interval"], &gate2["baseline"]),
        (&json!(0.004), &json!([-0.0021, 0.0101]), &json!("churn@1"))
    );
    let smb = gate2["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["place"] == "tier=smb")
        .unwrap();
    assert_eq!(
        (&smb["rows"], &smb["positives"], &smb["status"]),
        (&json!(93.0), &json!(8.0), &json!("underpowered"))
    );
    let n3 = &h.nights[2];
    assert_eq!(n3.failed.as_ref().unwrap()["stage"], "gate");
    assert_eq!(n3.gate.as_ref().unwrap()["delta"], -0.03);
    assert_eq!(
        n3.registered, None,
        "night 2's registration copied along is not night 3's"
    );
    let n4 = &h.nights[3];
    assert_eq!(
        n4.failed.as_ref().unwrap()["checks"][0]["name"],
        "row_count_change"
    );
    assert_eq!(
        n4.drift,
        [
            json!({"check": "row_count_change", "column": null, "value": 0.6, "threshold": 0.5, "explained": null, "explained_until": null}),
            json!({"check": "categorical_drift", "column": "region", "value": 0.12, "threshold": 0.05, "explained": "campaign in central", "explained_until": "2026-12-31"}),
        ]
    );
    assert!(
        n4.gate.is_none() && n4.splits.is_empty(),
        "night 3's records copied along are not night 4's"
    );
    assert!(
        n4.summary
            .starts_with("FAILED at validate (exit 1: a check failed)"),
        "{}",
        n4.summary
    );
    assert!(
        h.nights
            .iter()
            .all(|n| n.manifest_hash.is_some() && n.dir.ends_with(&n.night))
    );
    assert!(
        h.nights.iter().all(|n| n.leaks.is_empty()),
        "the fixture's leak checks found nothing"
    );
    let by: Vec<&Value> = h.moves.iter().map(|m| &m["night"]).collect();
    assert_eq!(by, [&json!(names[0]), &json!(names[1]), &Value::Null]);
    let registered_by: Vec<&Value> = h.versions.iter().map(|v| &v["night"]).collect();
    assert_eq!(registered_by, [&json!(names[0]), &json!(names[1])]);

    // The table: a row per night with its decision and what @prod did.
    let html = std::fs::read_to_string(&page).unwrap();
    for (i, n) in h.nights.iter().enumerate() {
        let start = html
            .find(&format!("data-night=\"{}\"", names[i]))
            .unwrap_or_else(|| panic!("no row for night {}", names[i]));
        let row = &html[start..start + html[start..].find("</tr>").unwrap()];
        let word = ["first model", "promoted", "blocked", "failed"][i];
        assert!(row.contains(&format!(">{word}</span>")), "night {i}: {row}");
        let alias = [
            "none → version 1",
            "version 1 → version 2",
            "unchanged (version 2)",
            "unchanged (version 2); by hand: version 2 → version 1 at ",
        ][i];
        assert!(
            row.contains(&format!("<td class=\"text alias\">{alias}"))
                && n.alias.words.starts_with(alias),
            "night {i}: {row}"
        );
    }
    assert!(
        html.contains("row_count_change")
            && html.contains("explained (campaign in central) until 2026-12-31")
    );
    assert!(html.contains("roll back: v2 mis-scores new regions"));
    // Each gated slice with its Δ and interval; the alias as it was when the page was drawn.
    assert!(
        html.contains("tier=smb Δ -0.0120 [-0.0904, +0.0664]"),
        "the slices' Δ"
    );
    assert!(html.contains("churn@prod when this page was drawn"));
    let (code, stderr) = check_page_showing(
        &page,
        &d.join("history.png"),
        &[
            "first model",
            "version 1 → version 2",
            "unchanged (version 2)",
            "validate (exit 1: a check failed)",
        ],
    );
    assert_eq!(code, 0, "{stderr}");

    // Not a night folder, and a --registry that is not there: bad input, nothing written.
    std::fs::remove_file(&page).unwrap();
    let empty = d.join("empty");
    std::fs::create_dir(&empty).unwrap();
    tool("report")
        .arg_history(std::slice::from_ref(&empty), &registry, &page)
        .run()
        .assert_bad_input("report", "is not a night folder");
    tool("report")
        .arg_history(&dirs, &d.join("nowhere"), &page)
        .run()
        .assert_bad_input("report", "--registry");
    assert!(!page.exists());
}

trait HistoryArgs {
    fn arg_history(self, nights: &[PathBuf], registry: &Path, page: &Path) -> Self;
}

impl HistoryArgs for crate::util::Run {
    /// `report history NIGHTS... --registry REGISTRY --model churn --html PAGE`.
    fn arg_history(self, nights: &[PathBuf], registry: &Path, page: &Path) -> Self {
        self.args(["history"]).args(nights).args([
            "--registry".as_ref(),
            registry.as_os_str(),
            "--model".as_ref(),
            "churn".as_ref(),
            "--html".as_ref(),
            page.as_os_str(),
        ])
    }
}
