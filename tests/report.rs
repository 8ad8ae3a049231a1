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
    // The Makefile plans with a guessed 90 s checkpoint; the tiny model writes one in ms.
    assert_eq!(pair(report, "checkpoint_write_s")["flagged"], true);
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

    // In a folder, a failed stage's record is skipped with a warning, and an earlier report's
    // output is not read again.
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let good = run_record(dir.path(), 5, [1.0, 2.0, 3.0]);
    std::fs::write(runs.join("a.json"), good.to_string()).unwrap();
    std::fs::write(runs.join("failed.json"), failed.to_string()).unwrap();
    let mut earlier = good.clone();
    earlier["report"] = json!({});
    earlier["timings"]
        .as_array_mut()
        .unwrap()
        .push(json!({"tool": "report", "started_at": "x", "wall_s": 1.0}));
    std::fs::write(runs.join("report.json"), earlier.to_string()).unwrap();
    let out = tool("report").args([&runs]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("failed.json: skipped"),
        "{}",
        out.stderr
    );
    assert_eq!(out.json()["report"]["records"], 1);
}
