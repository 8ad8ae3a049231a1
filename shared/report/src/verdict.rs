//! The night's verdict at the top of the page: passed, blocked, failed or incomplete, in
//! words a person reads first; for a night that stopped, the stage, its exit code and what it
//! means, the checks that failed with their numbers, what the tool said, what the gate
//! compared, and what the alias did. The records left out as stale are listed under it.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::escape::esc;
use crate::night::Night;
use crate::outcome::{Decision, Outcome, number};

/// The `report.nights[]` entry of a night.
pub fn night_json(night: &Night, outcome: &Outcome) -> Value {
    json!({
        "dir": night.dir,
        "status": outcome.status,
        "decision": outcome.decision,
        "summary": outcome.summary,
        "started_at": night.started_at,
        "manifest_hash": night.manifest_hash,
        "data_digest": night.data_digest,
        "root": night.root,
        "records": night.records.iter().map(|f| &f.name).collect::<Vec<_>>(),
        "stale": night.skipped,
        "stale_failure": night.stale_failure,
        "failed": outcome.failed,
        "gate": outcome.gate,
        "registered": outcome.registered,
        "prod": outcome.prod,
    })
}

/// The CSS class of a decision's banner.
fn class(decision: Decision) -> &'static str {
    match decision.status() {
        "passed" => "passed",
        "incomplete" => "incomplete",
        _ => "stopped",
    }
}

/// The banner's heading: `FAILED at validate (exit 1: a check failed)`.
pub fn heading(outcome: &Outcome) -> String {
    let stage = outcome.failed.as_ref().map_or_else(String::new, |f| {
        format!(
            " at {} (exit {}: {})",
            f.stage.as_deref().unwrap_or("an unknown stage"),
            f.exit_code.map_or_else(|| "?".into(), |c| c.to_string()),
            f.meaning
        )
    });
    match outcome.decision {
        Decision::Blocked => format!("BLOCKED{stage}"),
        Decision::Failed => format!("FAILED{stage}"),
        Decision::Incomplete => "INCOMPLETE: nothing registered, no stage failed".into(),
        d => format!("PASSED: {}", d.word()),
    }
}

/// Writes the banner of night `index` (the first one's id is `verdict`).
pub fn banner(html: &mut String, index: usize, night: &Night, outcome: &Outcome) {
    let id = if index == 0 {
        "verdict".to_string()
    } else {
        format!("verdict-{}", index + 1)
    };
    let _ = write!(
        html,
        "<section class=\"verdict {}\" id=\"{id}\" data-status=\"{}\" data-decision=\"{}\">\
         <h2>{}</h2>",
        class(outcome.decision),
        outcome.status,
        esc(outcome.decision.word()),
        esc(&heading(outcome)),
    );
    // A stopped night's checks, message and comparison below say why, each on its own.
    if outcome.failed.is_none() {
        let _ = write!(html, "<p class=\"summary\">{}</p>", esc(&outcome.headline));
    }
    gate_caveats(html, night);
    if let Some(failed) = &outcome.failed {
        if !failed.checks.is_empty() {
            html.push_str(
                "<p><b>Failing checks</b></p><div class=\"wide\"><table class=\"failed-checks\">\
                 <tr><th class=\"text\">section</th><th class=\"text\">check</th>\
                 <th class=\"text\">column / slice</th><th>value</th><th>threshold</th>\
                 <th class=\"text\">detail</th></tr>",
            );
            for c in &failed.checks {
                let threshold = match (c.threshold, &c.comparison) {
                    (Some(t), Some(cmp)) => format!("{cmp} {}", number(t)),
                    (Some(t), None) => number(t),
                    (None, _) => "-".into(),
                };
                let _ = write!(
                    html,
                    "<tr class=\"flag\"><td class=\"text\">{}</td><td class=\"text\">{}</td>\
                     <td class=\"text\">{}</td><td>{}</td><td>{}</td><td class=\"text wrap\">{}</td></tr>",
                    esc(&c.section),
                    esc(&c.name),
                    esc(c.place.as_deref().unwrap_or("-")),
                    c.value.map_or_else(|| "-".into(), number),
                    esc(&threshold),
                    esc(c.detail.as_deref().unwrap_or("")),
                );
            }
            html.push_str("</table></div>");
        }
        if !failed.reasons.is_empty() {
            html.push_str("<ul class=\"reasons\">");
            for r in &failed.reasons {
                let _ = write!(html, "<li>{}</li>", esc(r));
            }
            html.push_str("</ul>");
        }
        if failed.message.is_empty() {
            html.push_str(
                "<p class=\"note\">The stage said nothing on stderr (no failed.err).</p>",
            );
        } else {
            let _ = write!(
                html,
                "<p><b>What {} said</b> (failed.err)</p><pre class=\"message\">{}</pre>",
                esc(failed.stage.as_deref().unwrap_or("the stage")),
                esc(&failed.message.join("\n"))
            );
        }
        if failed.checks.is_empty() && failed.reasons.is_empty() && failed.exit_code == Some(2) {
            html.push_str(
                "<p class=\"note\">Exit 2 writes no record: the stage's message above is all \
                 there is to say why.</p>",
            );
        }
    }
    if let Some(gate) = &outcome.gate {
        let _ = write!(
            html,
            "<p><b>The gate compared</b>: {}{}</p>",
            esc(&gate.describe()),
            match gate.passed {
                Some(true) => " — passed",
                Some(false) => " — blocked",
                None => "",
            }
        );
    }
    let _ = write!(
        html,
        "<p class=\"alias\" data-moved=\"{}\"><b>Serving</b>: {}</p>",
        outcome.prod.moved,
        esc(&outcome.prod.summary)
    );
    let mut facts: Vec<String> = Vec::new();
    if let Some(at) = &night.started_at {
        facts.push(format!("manifest hashed at {at}"));
    }
    if let Some(hash) = &night.manifest_hash {
        facts.push(format!("manifest {}", &hash[..hash.len().min(16)]));
    }
    if let Some(digest) = night
        .data_digest
        .as_ref()
        .and_then(|d| d["digest"].as_str())
    {
        facts.push(format!("snapshot {}", &digest[..digest.len().min(24)]));
    }
    facts.push(format!(
        "{} record(s) of this night from {}",
        night.records.len(),
        night.dir.display()
    ));
    let _ = write!(html, "<p class=\"note\">{}</p>", esc(&facts.join(" · ")));
    if let Some(why) = &night.stale_failure {
        let _ = write!(
            html,
            "<p class=\"note\">Not this night's failure: {}</p>",
            esc(why)
        );
    }
    if !night.skipped.is_empty() {
        let _ = write!(
            html,
            "<details class=\"stale\"><summary>{} record(s) left out: not this night's</summary><ul>",
            night.skipped.len()
        );
        for s in &night.skipped {
            let _ = write!(html, "<li>{}: {}</li>", esc(&s.file), esc(&s.why));
        }
        html.push_str("</ul></details>");
    }
    html.push_str("</section>");
}

/// What a gate that passed still has to say, in the banner rather than only in its lists: slices
/// too small to tell whose point estimate got worse beyond `max_slice_drop`, and where the
/// candidate's seeds spread beyond the serving model's (`eval.unstable: warn`).
fn gate_caveats(html: &mut String, night: &Night) {
    let Some(gate) = night
        .records
        .iter()
        .rev()
        .find_map(|r| r.record.get("gate").filter(|g| g.is_object()))
    else {
        return;
    };
    let listed = |key: &str| -> Vec<String> {
        gate[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let drops = listed("underpowered_drops");
    if !drops.is_empty() {
        let _ = write!(
            html,
            "<p class=\"caveat warn\"><b>{} underpowered slice(s) got worse beyond max_slice_drop</b> \
             (too few rows to tell, too large to leave unsaid): {}</p>",
            drops.len(),
            esc(&drops.join("; "))
        );
    }
    let unstable = listed("unstable");
    if !unstable.is_empty() {
        let _ = write!(
            html,
            "<p class=\"caveat warn\"><b>Unstable training</b> (the candidate's seeds spread beyond \
             the serving model's): {}</p>",
            esc(&unstable.join(", "))
        );
    }
}
