//! The report page: one self-contained HTML file (inline CSS, inline SVG plots, one small inline
//! script that only checks the plots are there), readable offline and safe to mail or archive.

use std::fmt::Write as _;

use serde_json::Value;

use crate::Report;
use crate::escape::esc;
use crate::gate::{Entry, Gate, Status};
use crate::night::Night;
use crate::outcome::Outcome;
use crate::plots::{self, Bar, Series, SliceRow};
use crate::predictions::Kind;

/// Checks on load that every plot the page lists was drawn (see the script's header).
const PAGE_CHECK: &str = include_str!("page_check.js");

pub(crate) const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c9cfda;font-size:13px}
main{padding:18px 28px;max-width:1500px}
h2{font-size:17px;margin:26px 0 10px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:20px}.card span{font-size:12px;color:#5b6474}
.bad{color:#b33a00}.ok{color:#08754f}.warn{color:#8a5a00}.muted{color:#5b6474}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:14px}
figure{background:#fff;border:1px solid #dde1e8;border-radius:8px;margin:0;padding:8px}
figcaption{font-size:12px;color:#5b6474;padding:4px 6px}
table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:right}th{background:#eef0f4}
td:first-child,th:first-child,td.text,th.text{text-align:left}tr.flag td{background:#fff1e8}tr.warned td{background:#fff8e1}
ul.gate-lists{font-size:14px;padding-left:20px;max-width:1100px}ul.gate-lists li{margin:4px 0}
.wide{overflow-x:auto}table.gate td{white-space:nowrap}table.gate td.wrap{white-space:normal;min-width:8em}
table.gate td,table.gate th{padding:4px 6px}table.gate td.note-cell{white-space:normal;color:#5b6474;border-top:0}
.note{font-size:13px;color:#5b6474}
.verdict{background:#fff;border:1px solid #dde1e8;border-left:8px solid #08754f;border-radius:8px;padding:6px 18px 10px;margin:14px 0}
.verdict h2{margin:8px 0 6px;font-size:20px}.verdict.passed h2{color:#08754f}
.verdict.stopped{border-left-color:#b33a00;background:#fff8f4}.verdict.stopped h2{color:#b33a00}
.verdict.incomplete{border-left-color:#8a5a00}.verdict.incomplete h2{color:#8a5a00}
.verdict p{margin:6px 0;font-size:14px}.verdict table{margin:4px 0}.verdict td.wrap{white-space:normal;max-width:40em}
pre.message{background:#1d2330;color:#f6f7f9;padding:8px 10px;border-radius:6px;font-size:12px;white-space:pre-wrap;max-width:1100px}
details.stale{font-size:13px;color:#5b6474}
";

/// The page and the names of the plots it carries (`report.plots`). `nights` are the folders'
/// nights with what they came to: each gets its verdict at the top of the page.
pub fn page(report: &Report, nights: &[(Night, Outcome)]) -> (String, Vec<String>) {
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
    let gate = Gate::of(latest).and_then(Result::ok);
    let paired = gate.as_ref().filter(|g| g.is_paired());
    let gated_metrics = paired.map(Gate::plotted_metrics).unwrap_or_default();
    for metric in &gated_metrics {
        let gate = paired.expect("metrics come from a paired gate");
        figures.push(delta_figure(gate, metric));
    }
    // A paired gate's Δ plots supersede the noise floor's band: its intervals carry the seeds'
    // spread too. An old point gate, or none, keeps the candidate-vs-baseline view.
    if gated_metrics.is_empty() {
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
    }
    match drift_bars(latest) {
        Some(bars) => {
            let svg = plots::bars("Drift per column", "drift / its limit (1 = threshold or noise)", &bars, 1.0);
            figures.push((
                "drift".into(),
                svg,
                "Each column's drift against its reference, as a multiple of its limit (its threshold, or the sampling noise where that is larger); failed checks in orange. With drift windows a check beyond it can still pass: its own history makes it ordinary (see the record's `history`).".into(),
            ));
        }
        None => notes.push(
            "No drift plot: ds-validate had no previous profile to compare with (a first run), or did not run.".into(),
        ),
    }
    notes.extend(explained_drift(latest));
    let names: Vec<String> = figures.iter().map(|f| f.0.clone()).collect();

    let mut html = String::with_capacity(256 * 1024);
    let mut title = latest["manifest"]["run_id"]
        .as_str()
        .unwrap_or("run")
        .to_string();
    // One night: its verdict belongs in the title, where a tab or a mail's link shows it.
    if let [(_, outcome)] = nights {
        title = format!("{title}: {}", crate::verdict::heading(outcome));
    }
    let verdict_meta = if nights.is_empty() {
        String::new()
    } else {
        let statuses: Vec<&str> = nights.iter().map(|(_, o)| o.status).collect();
        format!(
            "<meta name=\"runfn-verdict\" content=\"{}\">",
            esc(&statuses.join(","))
        )
    };
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>runfn report: {}</title>\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"runfn-plots\" content=\"{}\">{verdict_meta}<style>{STYLE}</style></head><body>",
        esc(&title),
        esc(&names.join(","))
    );
    let _ = write!(
        html,
        "<header><h1>runfn report: {}</h1><p>{} record(s), {} run(s) · manifest {} · snapshot {}</p></header><main>",
        esc(&title),
        report.records,
        report.runs,
        esc(latest["manifest_hash"]
            .as_str()
            .map_or("-", |h| &h[..h.len().min(16)])),
        esc(latest["manifest"]["data"]["snapshot"]
            .as_str()
            .unwrap_or("-")),
    );
    about_the_run(&mut html, latest);
    for (i, (night, outcome)) in nights.iter().enumerate() {
        crate::verdict::banner(&mut html, i, night, outcome);
    }
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
    gate_section(&mut html, latest);
    mistakes_table(&mut html, latest);
    crate::serving::serving_drift_table(&mut html, latest);
    environment_table(&mut html, report);
    let _ = writeln!(html, "</main><script>{PAGE_CHECK}</script></body></html>");
    (html, names)
}

/// What the team wrote about the run: the manifest's description and its tags (owner,
/// ticket), in the tags' key order.
fn about_the_run(html: &mut String, latest: &Value) {
    if let Some(description) = latest["manifest"]["description"].as_str() {
        let _ = write!(html, "<p class=\"description\">{}</p>", esc(description));
    }
    let Some(tags) = latest["manifest"]["tags"]
        .as_object()
        .filter(|t| !t.is_empty())
    else {
        return;
    };
    html.push_str("<p class=\"tags\">");
    for (i, (key, value)) in tags.iter().enumerate() {
        let value = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_string);
        let _ = write!(
            html,
            "{}<span class=\"tag\"><b>{}</b>: {}</span>",
            if i == 0 { "" } else { " · " },
            esc(key),
            esc(&value)
        );
    }
    html.push_str("</p>");
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
        let gate = Gate::of(latest).and_then(Result::ok);
        match gate.filter(Gate::is_paired) {
            Some(gate) => {
                card(
                    text.into(),
                    &format!("gate (paired test, {})", gate.confidence_label()),
                    class,
                );
                let lists = gate.lists();
                if !lists.underpowered.is_empty() {
                    card(
                        lists.underpowered.len().to_string(),
                        "underpowered slices (see the gate)",
                        "warn",
                    );
                }
            }
            None => card(text.into(), "gate", class),
        }
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
        "checkpoint-plan figures off by more than the limit",
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

/// evaluate's most confident wrong predictions with what the model saw: the rows to look at
/// before trusting the metrics (a label error, a feature that lies, a slice it never learned).
fn mistakes_table(html: &mut String, latest: &Value) {
    let Some(mistakes) = latest["evaluate"]["mistakes"]
        .as_array()
        .filter(|m| !m.is_empty())
    else {
        return;
    };
    html.push_str("<h2>Most confident mistakes</h2><p class=\"note\">The test rows the model got wrong with the most confidence: a positive scored near 0, a negative near 1.</p>");
    let columns: Vec<&str> = mistakes[0]["values"]
        .as_object()
        .map(|v| v.keys().map(String::as_str).collect())
        .unwrap_or_default();
    html.push_str(
        "<div class=\"wide\"><table><tr><th>row</th><th>key</th><th>label</th><th>score</th>",
    );
    for column in &columns {
        let _ = write!(html, "<th>{}</th>", esc(column));
    }
    html.push_str("</tr>");
    for m in mistakes {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            m["row"],
            esc(m["key"].as_str().unwrap_or("")),
            if m["label"] == Value::Bool(true) {
                1
            } else {
                0
            },
            m["score"].as_f64().map_or("?".into(), fine)
        );
        for column in &columns {
            let _ = write!(
                html,
                "<td>{}</td>",
                esc(m["values"][*column].as_str().unwrap_or(""))
            );
        }
        html.push_str("</tr>");
    }
    html.push_str("</table></div>");
}

/// The figure of the gate's Δ for `metric`: `(name, svg, caption)`.
fn delta_figure(gate: &Gate, metric: &str) -> (String, String, String) {
    let confidence = gate.confidence_label();
    let lower = gate.lower_is_better(metric);
    let x_desc = if lower {
        format!("Δ {metric} = candidate − baseline (lower is better)")
    } else {
        format!("Δ {metric} = candidate − baseline")
    };
    let svg = plots::interval_chart(
        &format!("The gate: Δ {metric} per slice"),
        &x_desc,
        &format!("{confidence} interval"),
        &gate.delta_rows(metric),
    );
    let worse = if lower {
        format!(" For {metric} lower is better: a worse candidate lies to the right.")
    } else {
        String::new()
    };
    let caption = format!(
        "Δ {metric} overall and per slice (rows and positives in each label): the dot is Δ, the \
         bar its {confidence} interval from the paired test, the black line the row's limit, the \
         dashed line zero. Color is what the gate made of the row: passed, blocked, underpowered \
         (warned, not gated), undefined (one class only) or not gated.{worse}"
    );
    let name: String = format!("gate_{metric}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    (name, svg, caption)
}

fn gate_section(html: &mut String, latest: &Value) {
    let gate = match Gate::of(latest) {
        None => return,
        Some(Err(err)) => {
            let _ = write!(
                html,
                "<h2>Gate</h2><p class=\"bad\">The gate's section cannot be read: {}</p>",
                esc(&err)
            );
            return;
        }
        Some(Ok(gate)) => gate,
    };
    html.push_str("<h2>Gate</h2>");
    for r in &gate.reasons {
        let _ = write!(html, "<p class=\"bad\">{}</p>", esc(r));
    }
    if gate.checks.is_empty() {
        html.push_str(
            "<p class=\"note\">No gate compared anything (no baseline: a first model).</p>",
        );
        return;
    }
    if gate.is_paired() {
        paired_summary(html, &gate);
        paired_table(html, &gate);
    } else {
        point_table(html, &gate);
    }
}

/// The test and its rule in one sentence, then the places gated, underpowered, undefined and
/// only reported, each with why.
fn paired_summary(html: &mut String, gate: &Gate) {
    let confidence = gate.confidence_label();
    let mut methods: Vec<&str> = Vec::new();
    for m in gate.checks.iter().filter_map(|c| c.method.as_deref()) {
        if !methods.contains(&m) {
            methods.push(m);
        }
    }
    let rule = match gate.rule.as_deref() {
        Some("non_inferiority") => format!(
            "non-inferiority: a check passes only when Δ's one-sided {confidence} bound is within its limit"
        ),
        Some("no_regression") => format!(
            "no regression: a check blocks only when Δ's one-sided {confidence} bound is beyond its limit"
        ),
        Some(other) => format!("{other} at {confidence} confidence"),
        None => format!("unnamed rule at {confidence} confidence"),
    };
    let _ = write!(
        html,
        "<p class=\"note\">Paired test of candidate and baseline on the same test rows ({}); rule {}. \
         p adjusted by Holm within each slice column.</p>",
        esc(&if methods.is_empty() {
            "method not stated".to_string()
        } else {
            methods.join(", ")
        }),
        esc(&rule)
    );
    let lists = gate.lists();
    html.push_str("<ul class=\"gate-lists\">");

    let gated: Vec<String> = lists
        .gated
        .iter()
        .map(|e| {
            if e.checks.iter().any(|c| c.status() == Status::Blocked) {
                format!("{} (blocked)", lists.name(e))
            } else {
                lists.name(e)
            }
        })
        .collect();
    list_item(
        html,
        "ok",
        "Gated",
        &gated,
        "the test could see a drop of the limit there, and its bound decided.",
    );

    let described: Vec<String> = lists
        .underpowered
        .iter()
        .map(|e| {
            let mut why: Vec<String> = e
                .checks
                .first()
                .and_then(|c| c.counts(false))
                .into_iter()
                .collect();
            for c in &e.checks {
                let metric = if lists.several_metrics {
                    format!("{}: ", c.metric.as_deref().unwrap_or("?"))
                } else {
                    String::new()
                };
                match (c.detectable_drop, c.limit) {
                    (Some(d), Some(l)) => why.push(format!(
                        "{metric}detects only a drop of {} or more, the limit is {}",
                        num(d),
                        num(l)
                    )),
                    (Some(d), None) => {
                        why.push(format!("{metric}detects only a drop of {} or more", num(d)))
                    }
                    _ => {}
                }
            }
            if why.is_empty() {
                lists.name(e)
            } else {
                format!("{} ({})", lists.name(e), why.join("; "))
            }
        })
        .collect();
    let (blocked, warned): (Vec<&Entry<'_>>, Vec<&Entry<'_>>) = lists
        .underpowered
        .iter()
        .partition(|e| gate.blocked_on(&e.place));
    let names = |entries: &[&Entry<'_>]| {
        words(&entries.iter().map(|e| e.place.clone()).collect::<Vec<_>>())
    };
    let verdict = match (warned.is_empty(), blocked.is_empty()) {
        (_, true) => "warned about, not gated: the test could not have detected a drop of the limit there.".to_string(),
        (true, false) => "the gate blocked on them, although the test could not have detected a drop of the limit there.".to_string(),
        (false, false) => format!(
            "{} warned about, not gated; the gate blocked on {}.",
            names(&warned),
            names(&blocked)
        ),
    };
    list_item(html, "warn", "Underpowered", &described, &verdict);

    let undefined: Vec<String> = lists
        .undefined
        .iter()
        .map(|e| match e.checks.first() {
            Some(c) => format!("{} ({})", lists.name(e), c.why_undefined()),
            None => format!("{} (one class only)", e.place),
        })
        .collect();
    list_item(
        html,
        "muted",
        "Undefined",
        &undefined,
        "not gated: the metric has no value where the rows hold one class only.",
    );

    if !lists.not_gated.is_empty() {
        let reported: Vec<String> = lists
            .not_gated
            .iter()
            .map(|e| match e.checks.iter().find_map(|c| c.note.as_deref()) {
                Some(note) => format!("{} ({note})", lists.name(e)),
                None => lists.name(e),
            })
            .collect();
        list_item(html, "muted", "Not gated", &reported, "reported only.");
    }
    html.push_str("</ul>");
}

/// `<li><b>Title</b> (count): a, b and c. Verdict</li>`, escaped; `none.` and no verdict for
/// no items.
fn list_item(html: &mut String, class: &str, title: &str, items: &[String], verdict: &str) {
    let verdict = if items.is_empty() {
        String::new()
    } else {
        format!(" {}", capitalized(verdict))
    };
    let _ = write!(
        html,
        "<li><b class=\"{class}\">{}</b> ({}): {}.{}</li>",
        esc(title),
        items.len(),
        esc(&words(items)),
        esc(&verdict)
    );
}

/// `a, b and c`; `none` for no items.
fn words(items: &[String]) -> String {
    match items {
        [] => "none".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn paired_table(html: &mut String, gate: &Gate) {
    let _ = write!(
        html,
        "<div class=\"wide\"><table class=\"gate\"><tr><th>check</th><th class=\"text\">slice</th>\
         <th class=\"text\">status</th><th>baseline → candidate</th><th>Δ</th><th>interval ({})</th>\
         <th>bound</th><th>limit</th><th>p (adjusted)</th><th>rows / positives</th><th>detectable drop</th>\
         <th class=\"text\">test</th></tr>",
        esc(&gate.confidence_label())
    );
    let opt = |v: Option<f64>| v.map_or_else(|| "-".into(), fine);
    for c in &gate.checks {
        let status = c.status();
        let (row_class, cell_class) = match status {
            Status::Passed => ("", "ok"),
            Status::Blocked => (" class=\"flag\"", "bad"),
            Status::Underpowered => (" class=\"warned\"", "warn"),
            _ => ("", "muted"),
        };
        let limit = match (&c.comparison, c.limit) {
            (Some(cmp), Some(l)) => format!("{cmp} {}", fine(l)),
            (_, l) => opt(l),
        };
        let _ = write!(
            html,
            "<tr{row_class}><td>{}</td><td class=\"text\">{}</td><td class=\"text {cell_class}\">{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"text\">{}</td></tr>",
            esc(&c.name),
            esc(c.place()),
            esc(status.word()),
            match (c.baseline, c.candidate) {
                (None, None) => "-".to_string(),
                (b, c) => format!("{} → {}", opt(b), opt(c)),
            },
            opt(c.delta),
            c.interval.map_or_else(
                || "-".into(),
                |(lo, hi)| format!("[{}, {}]", fine(lo), fine(hi))
            ),
            opt(c.bound),
            esc(&limit),
            match (c.p_value, c.p_adjusted) {
                (Some(p), Some(adjusted)) => format!("{} ({})", fine(p), fine(adjusted)),
                (p, _) => opt(p),
            },
            match (c.rows, c.positives) {
                (Some(r), Some(p)) => format!("{r} / {p}"),
                (Some(r), None) => format!("{r} / -"),
                _ => "-".into(),
            },
            opt(c.detectable_drop),
            esc(c.method.as_deref().unwrap_or("-")),
        );
        // A note is a sentence: on a line of its own under its check, not in a narrow column.
        if let Some(note) = &c.note {
            let _ = write!(
                html,
                "<tr{row_class}><td></td><td class=\"text note-cell\" colspan=\"11\">{}</td></tr>",
                esc(note)
            );
        }
    }
    html.push_str("</table></div>");
}

/// An old point gate's checks: numbers and passed, no intervals.
fn point_table(html: &mut String, gate: &Gate) {
    html.push_str("<div class=\"wide\"><table class=\"gate\"><tr><th>check</th><th class=\"text\">slice</th><th>baseline</th><th>candidate</th><th>delta</th><th>limit</th><th>passed</th><th class=\"text\">note</th></tr>");
    let opt = |v: Option<f64>| v.map_or_else(|| "-".into(), num);
    for c in &gate.checks {
        let _ = write!(
            html,
            "<tr{}><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text wrap\">{}</td></tr>",
            if c.passed == Some(false) {
                " class=\"flag\""
            } else {
                ""
            },
            esc(&c.name),
            esc(c.place()),
            opt(c.baseline),
            opt(c.candidate),
            opt(c.delta),
            opt(c.limit),
            c.passed.map_or("-", |p| if p { "true" } else { "false" }),
            esc(c.note.as_deref().unwrap_or("")),
        );
    }
    html.push_str("</table></div>");
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

/// Each drift a person explained: what it was, why, and until when the explanation holds.
fn explained_drift(latest: &Value) -> Vec<String> {
    latest["validate"]["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let reason = c["explained"].as_str()?;
            let column = c["column"]
                .as_str()
                .map(|c| format!(" on `{c}`"))
                .unwrap_or_default();
            let value = c["value"].as_f64().map(num).unwrap_or_default();
            let until = c["explained_until"].as_str().unwrap_or("an unstated day");
            Some(format!(
                "Explained: {}{column} at {value} ({reason}), accepted until {until}; a larger \
                 drift or a later night fails again.",
                c["name"].as_str().unwrap_or("?")
            ))
        })
        .collect()
}

/// Every drift check of ds-validate, as a multiple of its limit (the larger of its threshold
/// and its sampling noise).
fn drift_bars(latest: &Value) -> Option<Vec<Bar>> {
    let bars: Vec<Bar> = latest["validate"]["checks"]
        .as_array()?
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(|n| n.ends_with("_drift")))
        .filter_map(|c| {
            let (value, threshold) = (c["value"].as_f64()?, c["threshold"].as_f64()?);
            let threshold = threshold.max(c["noise"].as_f64().unwrap_or(0.0));
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

/// A number in a metric's units to 4 decimals (an interval's end of -0.0001 reads better so
/// than as -1.00e-4); smaller ones in exponent form.
fn fine(v: f64) -> String {
    if v != 0.0 && v.abs() < 1e-4 {
        format!("{v:.2e}")
    } else {
        format!("{}", (v * 1e4).round() / 1e4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predictions::Limits;

    fn page_of(record: &Value) -> (String, Vec<String>) {
        page(
            &Report::build(std::slice::from_ref(record), Limits::default()).unwrap(),
            &[],
        )
    }

    fn fixture(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/report")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The figure named `name`, from its tag to its end.
    fn figure<'a>(html: &'a str, name: &str) -> &'a str {
        let start = html
            .find(&format!("data-plot=\"{name}\""))
            .unwrap_or_else(|| panic!("no figure {name}"));
        &html[start..start + html[start..].find("</figure>").unwrap()]
    }

    /// The manifest's description and tags are on the page, escaped, under its header.
    #[test]
    fn the_page_shows_the_runs_description_and_tags() {
        let record = serde_json::json!({
            "manifest": {"run_id": "weather", "description": "spring <retrain>",
                         "tags": {"owner": "ana", "ticket": "ML-412"}},
        });
        let (html, _) = page_of(&record);
        assert!(
            html.contains("<p class=\"description\">spring &lt;retrain&gt;</p>"),
            "{html}"
        );
        assert!(
            html.contains("<b>owner</b>: ana</span> · <span class=\"tag\"><b>ticket</b>: ML-412"),
            "{html}"
        );
        let (html, _) = page_of(&serde_json::json!({"manifest": {"run_id": "weather"}}));
        assert!(!html.contains("class=\"tags\""));
    }

    /// An explained drift is on the page with its reason and the day it holds until; a
    /// drift beyond its noise but under its threshold-or-noise limit is drawn under 1.
    #[test]
    fn the_page_says_what_is_explained_and_until_when() {
        let record = serde_json::json!({
            "manifest": {"run_id": "weather"},
            "validate": {"passed": true, "checks": [
                {"name": "numeric_drift", "column": "temp", "value": 0.9, "threshold": 0.02,
                 "noise": 0.3, "passed": false, "fails_run": true, "explained": "spring",
                 "explained_until": "2026-06-30"},
                {"name": "numeric_drift", "column": "wind", "value": 0.2, "threshold": 0.02,
                 "noise": 0.25, "passed": true, "fails_run": true}
            ]}
        });
        let (html, _) = page_of(&record);
        assert!(
            html.contains(
                "Explained: numeric_drift on `temp` at 0.9 (spring), accepted until 2026-06-30"
            ),
            "{html}"
        );
        let bars = drift_bars(&record).unwrap();
        assert_eq!(bars[0].value, 0.9 / 0.3);
        assert!(
            bars[1].value < 1.0,
            "wind is within its noise: {}",
            bars[1].value
        );
    }

    #[test]
    fn a_paired_gate_draws_delta_per_metric_and_lists_gated_underpowered_and_undefined() {
        let (html, names) = page_of(&fixture("paired-gate.json"));
        assert_eq!(
            names,
            ["gate_auc", "gate_logloss"],
            "Δ plots instead of the band"
        );
        let auc = figure(&html, "gate_auc");
        assert!(
            auc.contains("95% interval"),
            "the legend names the interval"
        );
        for label in [
            "overall (20000 rows, 2600 pos)",
            "tier=smb (93 rows, 8 pos)",
            "tenure_bucket=&lt;30d (1800 rows, 410 pos)",
            "undefined: one class only",
        ] {
            assert!(auc.contains(label), "{label} missing from the auc plot");
        }
        assert!(figure(&html, "gate_logloss").contains("lower is better"));

        let gate = &html[html.find("<h2>Gate</h2>").unwrap()..];
        assert!(gate.contains("rule non-inferiority: a check passes only when Δ&#39;s one-sided 95% bound is within its limit"));
        assert!(gate.contains("(delong, bootstrap)"));
        assert!(gate.contains(
            "<b class=\"ok\">Gated</b> (4): overall (auc, logloss), tier=enterprise (auc, logloss), \
             tenure_bucket=&lt;30d (auc, logloss) and tier=trial (logloss)."
        ), "{gate}");
        assert!(gate.contains(
            "<b class=\"warn\">Underpowered</b> (1): tier=smb (auc, logloss) (93 rows, 8 positives; \
             auc: detects only a drop of 0.113 or more, the limit is -0.01; logloss: detects only a \
             drop of 0.098 or more, the limit is 0.01). Warned about, not gated"
        ), "{gate}");
        assert!(gate.contains(
            "<b class=\"muted\">Undefined</b> (1): tier=trial (auc) (auc needs both classes: no \
             positives among its 60 rows). Not gated"
        ), "{gate}");
        assert!(gate.contains(
            "<b class=\"muted\">Not gated</b> (1): region=north (auc) (30 rows &lt; min_slice_rows 50: reported, not gated)"
        ), "{gate}");
        // The table: status words, the interval, p and its adjustment, counts and power.
        assert!(gate.contains("<th>interval (95%)</th>") && gate.contains("<th>p (adjusted)</th>"));
        assert!(gate.contains(
            "<td class=\"text\">tier=smb</td><td class=\"text warn\">underpowered</td><td>0.8 → 0.788</td>\
             <td>-0.012</td><td>[-0.0904, 0.0664]</td><td>-0.0778</td><td>&gt;= -0.01</td>\
             <td>0.76 (1)</td><td>93 / 8</td><td>0.113</td>"
        ), "{gate}");
        for word in ["passed", "underpowered", "undefined", "not gated"] {
            assert!(gate.contains(&format!("\">{word}</td>")), "status {word}");
        }
        assert!(
            html.contains("gate (paired test, 95%)"),
            "the card says how it was gated"
        );
    }

    #[test]
    fn an_old_point_gate_keeps_the_noise_floor_plot_and_its_table() {
        let (html, names) = page_of(&fixture("point-gate.json"));
        assert_eq!(names, ["slices"]);
        assert!(figure(&html, "slices").contains("noise floor"));
        assert!(!html.contains("interval ("), "no intervals to show");
        assert!(!html.contains("class=\"gate-lists\""));
        let gate = &html[html.find("<h2>Gate</h2>").unwrap()..];
        assert!(gate.contains(
            "<td>max_slice_drop</td><td class=\"text\">tenure_bucket=&lt;30d</td><td>0.79</td><td>0.786</td>\
             <td>-0.004</td><td>-0.01</td><td>true</td>"
        ), "{gate}");
        assert!(gate.contains("limit from the noise floor"));
    }

    #[test]
    fn blocking_on_an_underpowered_slice_is_said_and_injected_text_is_escaped() {
        let mut record = fixture("paired-gate.json");
        let checks = record["gate"]["checks"].as_array_mut().unwrap();
        let smb = checks
            .iter_mut()
            .find(|c| c["slice"] == "tier=smb" && c["metric"] == "auc")
            .unwrap();
        smb["passed"] = Value::Bool(false);
        smb["note"] = "<script>alert(1)</script>".into();
        record["gate"]["rule"] = "<b>own</b>".into();
        let mut html = String::new();
        gate_section(&mut html, &record);
        assert!(
            html.contains("The gate blocked on them, although the test could not"),
            "{html}"
        );
        assert!(!html.contains("<script>") && !html.contains("<b>own"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

        let mut html = String::new();
        gate_section(
            &mut html,
            &serde_json::json!({"gate": {"checks": [{"interval": "wide"}]}}),
        );
        assert!(
            html.contains("The gate's section cannot be read: gate.checks[0]: invalid type"),
            "{html}"
        );
    }
}
