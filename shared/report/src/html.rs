//! The report page: one self-contained HTML file (inline CSS, inline SVG plots, one small inline
//! script that only checks the plots are there), readable offline and safe to mail or archive.

use std::fmt::Write as _;

use serde_json::Value;

use crate::Report;
use crate::plots::{self, Bar, Series, SliceRow};
use crate::predictions::Kind;

/// Checks on load that every plot the page lists was drawn (see the script's header).
const PAGE_CHECK: &str = include_str!("page_check.js");

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c9cfda;font-size:13px}
main{padding:18px 28px;max-width:1500px}
h2{font-size:17px;margin:26px 0 10px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:20px}.card span{font-size:12px;color:#5b6474}
.bad{color:#b33a00}.ok{color:#08754f}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:14px}
figure{background:#fff;border:1px solid #dde1e8;border-radius:8px;margin:0;padding:8px}
figcaption{font-size:12px;color:#5b6474;padding:4px 6px}
table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:right}th{background:#eef0f4}
td:first-child,th:first-child,td.text{text-align:left}tr.flag td{background:#fff1e8}
.note{font-size:13px;color:#5b6474}
";

/// The page and the names of the plots it carries (`report.plots`).
pub fn page(report: &Report) -> (String, Vec<String>) {
    let latest = &report.latest;
    let mut figures: Vec<(String, String, String)> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let curve_series = |f: &dyn Fn(&crate::curves::StepPoint) -> Option<f64>| -> Vec<Series> {
        report
            .curves
            .iter()
            .map(|c| Series {
                label: c.label.clone(),
                points: c
                    .steps
                    .iter()
                    .filter_map(|p| Some((p.step as f64, f(p)?)))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let mut line_figure = |name: &str, title: &str, y: &str, caption: &str, series: Vec<Series>| {
        if series.is_empty() {
            return;
        }
        let svg = plots::lines(title, "step", y, &series);
        figures.push((name.to_string(), svg, caption.to_string()));
    };
    line_figure(
        "loss",
        "Training loss",
        "loss",
        "Mean loss of each log window, per seed.",
        curve_series(&|p| p.loss),
    );
    let val: Vec<Series> = report
        .curves
        .iter()
        .map(|c| Series {
            label: c.label.clone(),
            points: c
                .val
                .iter()
                .filter_map(|v| Some((v.step as f64, v.auc?)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    line_figure(
        "val",
        "Validation AUC",
        "AUC",
        "The validation split scored at each evaluation step, per seed.",
        val,
    );
    line_figure(
        "throughput",
        "Throughput",
        "samples/s",
        "Samples per second of each log window; a dip is a slow stretch (see the alerts).",
        curve_series(&|p| p.samples_per_s),
    );
    line_figure(
        "data_wait",
        "Data wait",
        "share of step time",
        "Share of each window spent waiting for the next batch; above a few percent the loop is input-bound.",
        curve_series(&|p| p.data_wait_fraction),
    );
    line_figure(
        "checkpoint_age",
        "Time since the last checkpoint",
        "s of training",
        "Seconds of training since the last checkpoint was written: the work a crash there would lose.",
        curve_series(&|p| Some(p.since_checkpoint_s)),
    );
    match slice_rows(latest) {
        Some((metric, rows)) => {
            let svg = plots::slices("Slices: candidate vs baseline", &metric, &rows);
            let caption = if latest.get("baseline").is_some() {
                "Per slice: the candidate (dot), the baseline (cross) and the noise floor's band (the spread over seeds)."
            } else {
                "Per slice: the candidate (dot) and the noise floor's band; no baseline yet (a first model)."
            };
            figures.push(("slices".into(), svg, caption.into()));
        }
        None => notes.push("No slices: the record has no evaluation with slices.".into()),
    }
    match drift_bars(latest) {
        Some(bars) => {
            let svg = plots::bars("Drift per column", "drift / its threshold (1 = the limit)", &bars, 1.0);
            figures.push((
                "drift".into(),
                svg,
                "Each column's drift against the previous profile, as a multiple of its threshold; failed checks in orange.".into(),
            ));
        }
        None => notes.push(
            "No drift plot: ds-validate had no previous profile to compare with (a first run), or did not run.".into(),
        ),
    }
    let names: Vec<String> = figures.iter().map(|f| f.0.clone()).collect();

    let mut html = String::with_capacity(256 * 1024);
    let title = latest["manifest"]["run_id"].as_str().unwrap_or("run");
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>runfn report: {}</title>\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"runfn-plots\" content=\"{}\"><style>{STYLE}</style></head><body>",
        esc(title),
        esc(&names.join(","))
    );
    let _ = write!(
        html,
        "<header><h1>runfn report: {}</h1><p>{} record(s), {} run(s) · manifest {} · snapshot {}</p></header><main>",
        esc(title),
        report.records,
        report.runs,
        esc(latest["manifest_hash"]
            .as_str()
            .map_or("-", |h| &h[..h.len().min(16)])),
        esc(latest["manifest"]["data"]["snapshot"]
            .as_str()
            .unwrap_or("-")),
    );
    cards(&mut html, report);
    html.push_str("<h2>Curves and checks</h2><div class=\"plots\">");
    for (name, svg, caption) in &figures {
        let _ = write!(
            html,
            "<figure class=\"plot\" data-plot=\"{}\">{svg}<figcaption>{}</figcaption></figure>",
            esc(name),
            esc(caption)
        );
    }
    html.push_str("</div>");
    for note in &notes {
        let _ = write!(html, "<p class=\"note\">{}</p>", esc(note));
    }
    workflow_table(&mut html, report);
    predictions_table(&mut html, report);
    alerts_table(&mut html, report);
    gate_table(&mut html, latest);
    environment_table(&mut html, report);
    let _ = writeln!(html, "</main><script>{PAGE_CHECK}</script></body></html>");
    (html, names)
}

fn cards(html: &mut String, report: &Report) {
    let latest = &report.latest;
    html.push_str("<div class=\"cards\">");
    let mut card = |value: String, label: &str, class: &str| {
        let _ = write!(
            html,
            "<div class=\"card\"><b class=\"{class}\">{}</b><span>{}</span></div>",
            esc(&value),
            esc(label)
        );
    };
    if let Some(auc) = latest["evaluate"]["overall"]["auc"].as_f64() {
        card(format!("{auc:.4}"), "test AUC (candidate)", "");
    }
    if let Some(floor) = latest["noise_floor"]["floor"].as_f64() {
        let n = latest["noise_floor"]["n"].as_u64().unwrap_or(0);
        card(
            format!("{floor:.4}"),
            &format!("noise floor over {n} seeds"),
            "",
        );
    }
    if let Some(passed) = latest["gate"]["passed"].as_bool() {
        let (text, class) = if passed {
            ("passed", "ok")
        } else {
            ("blocked", "bad")
        };
        card(text.into(), "gate", class);
    }
    if let Some(version) = latest["register"]["version"].as_u64() {
        let name = latest["register"]["name"].as_str().unwrap_or("model");
        card(format!("{name} v{version}"), "registered", "");
    }
    let alerts: usize = report.curves.iter().map(|c| c.alerts.len()).sum();
    card(
        alerts.to_string(),
        "training alerts",
        if alerts > 0 { "bad" } else { "ok" },
    );
    let flagged = report.predictions.iter().filter(|p| p.flagged).count();
    card(
        flagged.to_string(),
        "predictions off by more than the limit",
        if flagged > 0 { "bad" } else { "ok" },
    );
    card(
        format!("{:.1} s", report.map.total_wall_s),
        "wall time mapped",
        "",
    );
    if let Some(b) = &report.map.bottleneck {
        card(
            b.stage.clone(),
            &format!("bottleneck, {:.0}% of the time", b.share * 100.0),
            "",
        );
    }
    if let Some(cost) = &report.map.cost {
        card(
            format!("{:.4} {}", cost.per_run, cost.currency),
            "cost per run",
            "",
        );
    }
    html.push_str("</div>");
}

fn workflow_table(html: &mut String, report: &Report) {
    html.push_str(
        "<h2>Workflow map</h2><table><tr><th>stage</th><th>runs</th><th>wall p25</th><th>wall median</th>\
         <th>wall p75</th><th>cpu median</th><th>peak memory</th><th>share</th><th>cost</th></tr>",
    );
    for s in &report.map.stages {
        let bottleneck = report
            .map
            .bottleneck
            .as_ref()
            .is_some_and(|b| b.stage == s.stage);
        let _ = write!(
            html,
            "<tr{}><td>{}</td><td>{}</td><td>{:.3} s</td><td>{:.3} s</td><td>{:.3} s</td><td>{:.3} s</td><td>{:.0} MiB</td><td>{:.1}%</td><td>{}</td></tr>",
            if bottleneck { " class=\"flag\"" } else { "" },
            esc(&s.stage),
            s.runs,
            s.wall_s.p25,
            s.wall_s.median,
            s.wall_s.p75,
            s.cpu_s.median,
            s.max_rss_bytes as f64 / (1024.0 * 1024.0),
            s.share * 100.0,
            s.cost.map_or_else(|| "-".into(), |c| format!("{c:.6}")),
        );
    }
    html.push_str("</table>");
}

fn predictions_table(html: &mut String, report: &Report) {
    html.push_str(
        "<h2>Predicted vs measured</h2><table><tr><th>figure</th><th>of</th><th>predicted / limit</th>\
         <th>measured</th><th>gap</th><th>from</th></tr>",
    );
    for p in &report.predictions {
        let gap = p
            .gap
            .map_or_else(|| "-".into(), |g| format!("{:+.0}%", g * 100.0));
        let _ = write!(
            html,
            "<tr{}><td>{}{}</td><td>{}</td><td>{} {unit}</td><td>{} {unit}</td><td>{}</td><td class=\"text\">{}</td></tr>",
            if p.flagged { " class=\"flag\"" } else { "" },
            esc(&p.name),
            if p.kind == Kind::Limit {
                " (limit)"
            } else {
                ""
            },
            esc(&p.of),
            num(p.predicted),
            num(p.measured),
            esc(&gap),
            esc(&p.source),
            unit = esc(p.unit),
        );
    }
    html.push_str("</table>");
    if report.predictions.is_empty() {
        html.push_str("<p class=\"note\">No pairs: the records have no ckpt-interval plan or train measurements.</p>");
    }
}

fn alerts_table(html: &mut String, report: &Report) {
    html.push_str("<h2>Training alerts</h2>");
    let alerts: Vec<(&str, &Value)> = report
        .curves
        .iter()
        .flat_map(|c| c.alerts.iter().map(move |a| (c.label.as_str(), a)))
        .collect();
    if alerts.is_empty() {
        html.push_str("<p class=\"note\">None: no throughput drop, loss spike, stale checkpoint or input-bound stretch.</p>");
        return;
    }
    html.push_str("<table><tr><th>run</th><th>step</th><th>kind</th><th>message</th></tr>");
    for (label, a) in alerts {
        let _ = write!(
            html,
            "<tr class=\"flag\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(label),
            a["step"],
            esc(a["kind"].as_str().unwrap_or("?")),
            esc(a["message"].as_str().unwrap_or(""))
        );
    }
    html.push_str("</table>");
}

fn gate_table(html: &mut String, latest: &Value) {
    let Some(checks) = latest["gate"]["checks"].as_array() else {
        return;
    };
    html.push_str("<h2>Gate</h2>");
    if let Some(reasons) = latest["gate"]["reasons"]
        .as_array()
        .filter(|r| !r.is_empty())
    {
        for r in reasons {
            let _ = write!(
                html,
                "<p class=\"bad\">{}</p>",
                esc(r.as_str().unwrap_or(""))
            );
        }
    }
    if checks.is_empty() {
        html.push_str(
            "<p class=\"note\">No gate compared anything (no baseline: a first model).</p>",
        );
        return;
    }
    html.push_str("<table><tr><th>check</th><th>slice</th><th>baseline</th><th>candidate</th><th>delta</th><th>limit</th><th>passed</th></tr>");
    for c in checks {
        let _ = write!(
            html,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if c["passed"] == Value::Bool(false) {
                " class=\"flag\""
            } else {
                ""
            },
            esc(c["name"].as_str().unwrap_or("")),
            esc(c["slice"].as_str().unwrap_or("overall")),
            c["baseline"].as_f64().map_or_else(|| "-".into(), num),
            c["candidate"].as_f64().map_or_else(|| "-".into(), num),
            c["delta"].as_f64().map_or_else(|| "-".into(), num),
            c["limit"].as_f64().map_or_else(|| "-".into(), num),
            c["passed"],
        );
    }
    html.push_str("</table>");
}

fn environment_table(html: &mut String, report: &Report) {
    html.push_str(
        "<h2>Machines and software</h2><table><tr><th>stages</th><th>environment</th></tr>",
    );
    for (stages, env) in &report.environments {
        let fields: Vec<String> = env
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                format!(
                    "{k}: {}",
                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                )
            })
            .collect();
        let _ = write!(
            html,
            "<tr><td>{}</td><td class=\"text\">{}</td></tr>",
            esc(&stages.join(", ")),
            esc(&fields.join(" · "))
        );
    }
    html.push_str("</table>");
}

/// `(metric, rows)`: the overall row, then one row per slice of the candidate's evaluation.
fn slice_rows(latest: &Value) -> Option<(String, Vec<SliceRow>)> {
    let evaluation = latest.get("evaluate")?;
    let metric = latest["noise_floor"]["metric"]
        .as_str()
        .and_then(|m| m.strip_prefix("evaluate.overall."))
        .unwrap_or("auc")
        .to_string();
    let band = |spread: &Value| Some((spread["min"].as_f64()?, spread["max"].as_f64()?));
    let mut rows = vec![SliceRow {
        label: "overall".into(),
        candidate: evaluation["overall"][&metric].as_f64(),
        baseline: latest["baseline"]["overall"][&metric].as_f64(),
        band: band(&latest["noise_floor"]),
    }];
    for (column, values) in evaluation["slices"].as_object().into_iter().flatten() {
        for (value, metrics) in values.as_object().into_iter().flatten() {
            rows.push(SliceRow {
                label: format!("{column}={value}"),
                candidate: metrics[&metric].as_f64(),
                baseline: latest["baseline"]["slices"][column][value][&metric].as_f64(),
                band: band(&latest["noise_floor"]["slices"][column][value]),
            });
        }
    }
    (rows.len() > 1 || rows[0].candidate.is_some()).then_some((metric, rows))
}

/// Every drift check of ds-validate, as a multiple of its threshold.
fn drift_bars(latest: &Value) -> Option<Vec<Bar>> {
    let bars: Vec<Bar> = latest["validate"]["checks"]
        .as_array()?
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(|n| n.ends_with("_drift")))
        .filter_map(|c| {
            let (value, threshold) = (c["value"].as_f64()?, c["threshold"].as_f64()?);
            Some(Bar {
                label: c["column"].as_str().unwrap_or("?").to_string(),
                value: if threshold > 0.0 {
                    value / threshold
                } else {
                    value
                },
                failed: c["passed"] == Value::Bool(false),
            })
        })
        .collect();
    (!bars.is_empty()).then_some(bars)
}

fn num(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.001 {
        format!("{v:.2e}")
    } else {
        format!("{}", (v * 1e4).round() / 1e4)
    }
}

/// Escapes text for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
