//! The history page: every night in a row of a table and in a plot of the gate's Δ, the
//! registry's versions and alias moves under them. Self-contained like the night's page
//! (inline CSS and SVG, the same small script checking that the plot was drawn).

use std::fmt::Write as _;

use crate::alias::version_words;
use crate::escape::esc;
use crate::history::{History, NightRow};
use crate::html::STYLE;
use crate::outcome::{Decision, number};
use crate::plots;

const PAGE_CHECK: &str = include_str!("page_check.js");

const HISTORY_STYLE: &str = "\
table.nights td{vertical-align:top}table.nights td.text{white-space:normal;min-width:7em;max-width:26em}
tr.stopped td{background:#fff1e8}tr.incomplete td{background:#fff8e1}
td .decision{font-weight:600}table.nights{font-size:12px}.plots.single{grid-template-columns:1fr;max-width:1000px}ul.cell{margin:0;padding-left:16px}details.cell summary{cursor:pointer}
";

/// The plots the history page carries (`history.plots`).
pub const PLOTS: [&str; 1] = ["nights"];

/// The page, and the names of its plots.
pub fn page(history: &History) -> (String, Vec<String>) {
    let names: Vec<String> = if history.nights.is_empty() {
        Vec::new()
    } else {
        PLOTS.iter().map(|p| p.to_string()).collect()
    };
    let title = format!(
        "runfn history: {}, {} night(s)",
        history.alias.as_deref().unwrap_or("the model"),
        history.nights.len()
    );
    let mut html = String::with_capacity(128 * 1024);
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"runfn-plots\" content=\"{}\"><style>{STYLE}{HISTORY_STYLE}</style></head><body>",
        esc(&title),
        esc(&names.join(","))
    );
    let span = match (history.nights.first(), history.nights.last()) {
        (Some(a), Some(b)) => format!("{} to {}", a.date, b.date),
        _ => "no nights".into(),
    };
    let _ = write!(
        html,
        "<header><h1>{}</h1><p>{} · registry {} · drawn {} (a later alias move by hand shows on the next night's page; <code>register resolve</code> says what serves now)</p></header><main>",
        esc(&title),
        esc(&span),
        esc(&history
            .registry
            .as_ref()
            .map_or_else(|| "-".into(), |r| r.display().to_string())),
        esc(&history.drawn_at),
    );
    cards(&mut html, history);
    if !history.nights.is_empty() {
        let _ = write!(
            html,
            "<h2>The gate night by night</h2><div class=\"plots single\"><figure class=\"plot\" \
             data-plot=\"nights\">{}<figcaption>{}</figcaption></figure></div>",
            nights_plot(history),
            esc(
                "Δ of the candidate's overall AUC against the baseline the gate compared, one row \
                 per night (oldest on top): the dot is Δ, the bar its interval at the gate's \
                 confidence, the black line the gate's limit, the dashed line zero. Color is \
                 what the night came to; a night without a Δ (a first model, a stage that failed \
                 before the gate) says why in its row."
            )
        );
    }
    nights_table(&mut html, history);
    registry_tables(&mut html, history);
    let _ = writeln!(html, "</main><script>{PAGE_CHECK}</script></body></html>");
    (html, names)
}

fn cards(html: &mut String, history: &History) {
    html.push_str("<div class=\"cards\">");
    let count = |d: Decision| history.nights.iter().filter(|n| n.decision == d).count();
    let mut card = |value: String, label: &str, class: &str| {
        let _ = write!(
            html,
            "<div class=\"card\"><b class=\"{class}\">{}</b><span>{}</span></div>",
            esc(&value),
            esc(label)
        );
    };
    card(history.nights.len().to_string(), "nights", "");
    card(
        (count(Decision::Promoted) + count(Decision::FirstModel)).to_string(),
        "promoted",
        "ok",
    );
    let blocked = count(Decision::Blocked);
    card(
        blocked.to_string(),
        "blocked by the gate",
        if blocked > 0 { "bad" } else { "ok" },
    );
    let failed = count(Decision::Failed) + count(Decision::Incomplete);
    card(
        failed.to_string(),
        "failed or stopped",
        if failed > 0 { "bad" } else { "ok" },
    );
    if let Some(alias) = &history.alias {
        // The page is drawn after each night: a move by hand since then is not on it.
        card(
            version_words(history.version),
            &format!("{alias} when this page was drawn"),
            "",
        );
    }
    html.push_str("</div>");
    if let Some(err) = &history.registry_error {
        let _ = write!(
            html,
            "<p class=\"bad\">The registry could not be read: {}</p>",
            esc(err)
        );
    } else if history.alias.is_some() && !history.registry_found {
        let _ = write!(
            html,
            "<p class=\"note\">No registry at {}: alias moves are from the nights' records only.</p>",
            esc(&history
                .registry
                .as_ref()
                .map_or_else(String::new, |r| r.display().to_string()))
        );
    }
}

fn nights_plot(history: &History) -> String {
    let rows: Vec<plots::IntervalRow> = history
        .nights
        .iter()
        .map(|n| {
            let gate = n.gate.as_ref().filter(|g| !g.no_baseline);
            let note = match (n.decision, gate.and_then(|g| g.delta)) {
                (_, Some(_)) => None,
                (Decision::FirstModel, None) => Some("first model: no baseline".to_string()),
                (Decision::Failed, None) => Some(format!(
                    "failed at {}",
                    n.failed
                        .as_ref()
                        .and_then(|f| f.stage.as_deref())
                        .unwrap_or("?")
                )),
                (Decision::Incomplete, None) => Some("incomplete: nothing registered".into()),
                (_, None) => Some("no Δ recorded".into()),
            };
            plots::IntervalRow {
                label: n.date.trim_end_matches(" UTC").to_string(),
                delta: gate.and_then(|g| g.delta),
                interval: gate.and_then(|g| g.interval),
                limit: gate.and_then(|g| g.limit),
                class: n.decision.class(),
                note,
            }
        })
        .collect();
    let confidences: Vec<String> = history
        .nights
        .iter()
        .filter_map(|n| n.gate.as_ref()?.confidence)
        .map(|c| format!("{}%", (c * 1000.0).round() / 10.0))
        .collect();
    let interval = match confidences.first() {
        Some(c) if confidences.iter().all(|x| x == c) => format!("{c} interval"),
        _ => "interval (the gate's confidence)".into(),
    };
    plots::interval_chart(
        "The gate: Δ AUC night by night",
        "Δ auc = candidate − baseline (overall)",
        &interval,
        &rows,
    )
}

fn nights_table(html: &mut String, history: &History) {
    html.push_str(
        "<h2>Nights</h2><div class=\"wide\"><table class=\"nights\"><tr><th class=\"text\">night</th>\
         <th class=\"text\">decision</th><th class=\"text\">snapshot</th><th class=\"text\">rows per split</th>\
         <th class=\"text\">drift</th><th class=\"text\">leaks</th><th class=\"text\">gate</th>\
         <th class=\"text\">slices (rows / positives)</th><th class=\"text\">alias</th>\
         <th class=\"text\">failed stage</th></tr>",
    );
    for n in &history.nights {
        night_row(html, n);
    }
    html.push_str("</table></div>");
    if history.nights.iter().any(|n| n.stale > 0) {
        html.push_str(
            "<p class=\"note\">Each night shows only its own records: a night folder's records \
             from earlier nights (a stage that failed leaves the later stages' older records in \
             place) are left out; see `report NIGHT_DIR` for which and why.</p>",
        );
    }
}

fn night_row(html: &mut String, n: &NightRow) {
    let class = match n.status {
        "passed" => "",
        "incomplete" => " class=\"incomplete\"",
        _ => " class=\"stopped\"",
    };
    let cell = |items: Vec<String>, none: &str| -> String {
        if items.is_empty() {
            return format!("<span class=\"muted\">{}</span>", esc(none));
        }
        let mut out = String::from("<ul class=\"cell\">");
        for item in items {
            let _ = write!(out, "<li>{}</li>", esc(&item));
        }
        out.push_str("</ul>");
        out
    };
    let snapshot = {
        let s = &n.snapshot;
        let mut parts: Vec<String> = Vec::new();
        // The name the manifest pinned (`./lake@snapshot=2017-09`) says which data it was; the
        // digest proves it.
        if let Some(name) = &s.name {
            parts.push(name.clone());
        }
        if let Some(d) = &s.digest {
            parts.push(d[..d.len().min(19)].to_string());
        }
        if let Some(rows) = s.rows {
            parts.push(format!("{rows} rows"));
        }
        if let Some(files) = s.files {
            parts.push(format!("{files} files"));
        }
        if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join(", ")
        }
    };
    let splits: Vec<String> = n
        .splits
        .iter()
        .map(|s| match (&s.after, &s.until) {
            (Some(after), Some(until)) => format!("{}: {} ({after} to {until})", s.split, s.rows),
            _ => format!("{}: {}", s.split, s.rows),
        })
        .collect();
    let drift: Vec<String> = n
        .drift
        .iter()
        .map(|d| {
            let at = d
                .column
                .as_deref()
                .map(|c| format!(" [{c}]"))
                .unwrap_or_default();
            let numbers = match (d.value, d.threshold) {
                (Some(v), Some(t)) => format!(" {} > {}", number(v), number(t)),
                _ => String::new(),
            };
            match &d.explained {
                Some(reason) => format!(
                    "{}{at}{numbers}: explained ({reason}){}",
                    d.check,
                    d.explained_until
                        .as_deref()
                        .map(|u| format!(" until {u}"))
                        .unwrap_or_default()
                ),
                None => format!("{}{at}{numbers}: failed", d.check),
            }
        })
        .collect();
    let leaks: Vec<String> = n
        .leaks
        .iter()
        .map(|l| {
            let of = l.of.map(|o| format!(" of {o}")).unwrap_or_default();
            let verdict = match (&l.reason, l.passed) {
                (_, false) => "failed".to_string(),
                (Some(r), true) => format!("let through ({r})"),
                (None, true) => "within its tolerance".to_string(),
            };
            format!("{} {}{of}: {verdict}", l.check, l.count)
        })
        .collect();
    let gate = match &n.gate {
        None => "<span class=\"muted\">not reached</span>".to_string(),
        Some(g) => esc(&g.describe()),
    };
    let slices = n
        .gate
        .as_ref()
        .map(|g| {
            g.slices
                .iter()
                .map(|s| {
                    let delta = match (s.delta, s.interval) {
                        (Some(d), Some((low, high))) => {
                            format!(" Δ {d:+.4} [{low:+.4}, {high:+.4}]")
                        }
                        (Some(d), None) => format!(" Δ {d:+.4}"),
                        _ => String::new(),
                    };
                    format!(
                        "{}{delta}, {} rows / {} positives ({})",
                        s.place,
                        s.rows.map_or_else(|| "-".into(), |r| r.to_string()),
                        s.positives.map_or_else(|| "-".into(), |p| p.to_string()),
                        s.status
                    )
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let slices = if slices.len() > 4 {
        format!(
            "<details class=\"cell\"><summary>{} slices</summary>{}</details>",
            slices.len(),
            cell(slices, "")
        )
    } else {
        cell(slices, "-")
    };
    let failed = match &n.failed {
        None => "<span class=\"muted\">-</span>".to_string(),
        Some(f) => {
            let mut items = vec![format!(
                "{} (exit {}: {})",
                f.stage.as_deref().unwrap_or("?"),
                f.exit_code.map_or_else(|| "?".into(), |c| c.to_string()),
                f.meaning
            )];
            items.extend(f.checks.iter().map(|c| c.describe()));
            if f.checks.is_empty() {
                items.extend(f.reasons.iter().cloned());
                items.extend(f.message.last().cloned());
            }
            cell(items, "")
        }
    };
    let _ = write!(
        html,
        "<tr{class} data-night=\"{}\" data-decision=\"{}\"><td class=\"text\">{}<br><span class=\"muted\">{}</span></td>\
         <td class=\"text\"><span class=\"decision {}\">{}</span></td><td class=\"text\">{}</td>\
         <td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td>\
         <td class=\"text\">{}</td><td class=\"text alias\">{}</td><td class=\"text\">{}</td></tr>",
        esc(&n.night),
        esc(n.decision.word()),
        esc(&n.date),
        esc(&n.night),
        match n.status {
            "passed" => "ok",
            "incomplete" => "warn",
            _ => "bad",
        },
        esc(n.decision.word()),
        esc(&snapshot),
        cell(splits, "-"),
        cell(drift, "none"),
        cell(leaks, "none"),
        gate,
        slices,
        esc(&n.alias.words),
        failed,
    );
}

fn registry_tables(html: &mut String, history: &History) {
    let Some(alias) = &history.alias else {
        html.push_str(
            "<p class=\"note\">No model name (pass --model): the registry was not read.</p>",
        );
        return;
    };
    let _ = write!(
        html,
        "<h2>Versions in the registry</h2>{}",
        if history.versions.is_empty() {
            "<p class=\"note\">None.</p>"
        } else {
            ""
        }
    );
    if !history.versions.is_empty() {
        html.push_str(
            "<div class=\"wide\"><table class=\"versions\"><tr><th>version</th><th class=\"text\">created</th>\
             <th class=\"text\">manifest</th><th class=\"text\">snapshot</th><th class=\"text\">code</th>\
             <th class=\"text\">gate</th><th>test AUC</th><th class=\"text\">aliases</th><th class=\"text\">night</th></tr>",
        );
        for v in &history.versions {
            let gate = match (v.gate_passed, v.no_baseline, &v.ungated_reason) {
                (_, _, Some(reason)) => format!("ungated: {reason}"),
                (Some(true), Some(true), _) => "passed (no baseline)".into(),
                (Some(true), _, _) => "passed".into(),
                (Some(false), _, _) => "failed".into(),
                _ => "-".into(),
            };
            let _ = write!(
                html,
                "<tr><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td>\
                 <td class=\"text\">{}</td><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
                v.version,
                esc(&v.created_at),
                esc(&v.manifest_hash[..v.manifest_hash.len().min(12)]),
                esc(v.snapshot.as_deref().unwrap_or("-")),
                esc(v.code_commit.as_deref().unwrap_or("-")),
                esc(&gate),
                v.auc.map_or_else(|| "-".into(), number),
                esc(&v.aliases.join(", ")),
                esc(v.night.as_deref().unwrap_or("-")),
            );
        }
        html.push_str("</table></div>");
    }
    let _ = write!(html, "<h2>Moves of {}</h2>", esc(alias));
    if history.moves.is_empty() {
        html.push_str("<p class=\"note\">None.</p>");
        return;
    }
    html.push_str(
        "<table class=\"moves\"><tr><th class=\"text\">at</th><th class=\"text\">from → to</th>\
         <th class=\"text\">reason</th><th class=\"text\">by</th></tr>",
    );
    for m in &history.moves {
        let _ = write!(
            html,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{} → {}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            esc(&m.r#move.at),
            esc(&version_words(m.r#move.from_version)),
            esc(&version_words(Some(m.r#move.to_version))),
            esc(m.r#move.reason.as_deref().unwrap_or("")),
            esc(&m
                .night
                .as_ref()
                .map_or_else(|| "by hand".to_string(), |n| format!("night {n}"))),
        );
    }
    html.push_str("</table>");
}
