//! The nights together: one row per night folder (what the night read, what it found, what
//! the gate compared and decided, what the alias did, where it stopped), and the registry's
//! versions and alias moves beside them.
//!
//! A night's alias move is its own registration's (matched by version in the alias history, or
//! from its records when the registry lacks it); a move that no night made was made by hand
//! (`register alias`) and is shown in the night during which it happened.

use std::path::{Path, PathBuf};

use runfn_registry::AliasMove;
use serde::Serialize;
use serde_json::Value;

use crate::alias::{AliasLog, describe_move, version_words};
use crate::night::Night;
use crate::outcome::{Decision, FailedStage, GateView, Outcome, Registered, furthest_with};

/// The snapshot a night read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    /// `manifest.data.snapshot` as the night's manifest pinned it (`./lake@snapshot=2017-09`).
    pub name: Option<String>,
    pub path: Option<String>,
    pub digest: Option<String>,
    pub files: Option<u64>,
    pub bytes: Option<u64>,
    /// Rows, as ds-validate profiled them.
    pub rows: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Split {
    pub split: String,
    pub rows: u64,
    /// The time range a rolling or ranged split resolved to (`splits_resolved`), when it did.
    pub after: Option<String>,
    pub until: Option<String>,
}

/// A ds-validate check that failed, or failed and was explained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    pub check: String,
    pub column: Option<String>,
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    /// The reason a person gave (`--explained`); `None` for an unexplained failure.
    pub explained: Option<String>,
    /// The last day the explanation holds.
    pub explained_until: Option<String>,
}

/// A leak-check check that found something (let through by a tolerance, or failed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Leak {
    pub check: String,
    pub count: f64,
    pub of: Option<f64>,
    pub passed: bool,
    /// Why it was let through (`reason`), when a tolerance says.
    pub reason: Option<String>,
}

/// What the alias did during a night.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasChange {
    /// Whether the night's registration moved it.
    pub moved: bool,
    pub from: Option<i64>,
    pub to: Option<i64>,
    /// The version it stayed at when the night did not move it (`None`: unknown, or nothing).
    pub stayed: Option<i64>,
    /// Moves no night made that happened between this night's start and the next's.
    pub by_hand: Vec<AliasMove>,
    /// `1 → 2`, `unchanged (version 2)`, with the moves by hand.
    pub words: String,
}

/// One night of the history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NightRow {
    /// The folder's name (a UTC stamp such as `2026-12-03T031700Z`).
    pub night: String,
    pub dir: PathBuf,
    /// The folder's stamp as a date, else when the night's manifest was hashed.
    pub date: String,
    pub started_at: Option<String>,
    pub status: &'static str,
    pub decision: Decision,
    pub summary: String,
    pub manifest_hash: Option<String>,
    pub snapshot: Snapshot,
    pub splits: Vec<Split>,
    pub drift: Vec<Drift>,
    pub leaks: Vec<Leak>,
    pub gate: Option<GateView>,
    pub registered: Option<Registered>,
    pub alias: AliasChange,
    pub failed: Option<FailedStage>,
    /// Records in the folder left out as not this night's.
    pub stale: usize,
}

/// A registered version, with the night that registered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Version {
    pub version: i64,
    pub created_at: String,
    pub manifest_hash: String,
    pub snapshot: Option<String>,
    pub code_commit: Option<String>,
    pub gate_passed: Option<bool>,
    pub no_baseline: Option<bool>,
    pub auc: Option<f64>,
    pub ungated_reason: Option<String>,
    pub aliases: Vec<String>,
    pub night: Option<String>,
}

/// An alias move, with the night that made it (`None`: by hand).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Move {
    #[serde(flatten)]
    pub r#move: AliasMove,
    pub night: Option<String>,
}

/// One night reduced to its row and what it came to. The nights' records are large (a few MB
/// each, parsed); a history of thousands of nights keeps only these.
#[derive(Debug)]
pub struct Summary {
    row: NightRow,
    outcome: Outcome,
    /// The night's own move: the one that pointed the alias at the version it registered.
    own_move: Option<AliasMove>,
}

/// Reduces nights to summaries as they are read, in order, each night's alias moves being
/// those that happened until the next night's start (`Outcome::of`'s `until`): a night waits
/// here only until a later one says when it started.
#[derive(Debug)]
pub struct Summaries<'a> {
    log: Option<&'a AliasLog>,
    waiting: Vec<Night>,
    done: Vec<Summary>,
}

impl<'a> Summaries<'a> {
    pub fn new(log: Option<&'a AliasLog>) -> Summaries<'a> {
        Summaries {
            log,
            waiting: Vec::new(),
            done: Vec::new(),
        }
    }

    pub fn push(&mut self, night: Night) {
        if let Some(start) = night.started_at.clone() {
            for waiting in std::mem::take(&mut self.waiting) {
                self.settle(waiting, Some(&start));
            }
        }
        self.waiting.push(night);
    }

    fn settle(&mut self, night: Night, until: Option<&str>) {
        let outcome = Outcome::of(&night, self.log, until);
        let own_move = outcome.registered.as_ref().and_then(|r| {
            let log = self.log?;
            (r.promoted.as_deref() == Some(log.alias.as_str()))
                .then(|| log.move_to(r.version).cloned())
                .flatten()
        });
        let row = row(&night, &outcome, own_move.as_ref());
        self.done.push(Summary {
            row,
            outcome,
            own_move,
        });
    }

    /// Every night's summary, the last ones with no later start to wait for.
    pub fn finish(mut self) -> Vec<Summary> {
        for waiting in std::mem::take(&mut self.waiting) {
            self.settle(waiting, None);
        }
        self.done
    }
}

/// The model a night is of, when it names one (see `model_name`); the nights' model is the
/// newest night's that names one.
pub fn model_of(night: &Night) -> Option<String> {
    crate::outcome::model_name(night)
}

/// The history of a model's nights.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    /// `churn@prod`, when a model name was known.
    pub alias: Option<String>,
    pub registry: Option<PathBuf>,
    pub registry_found: bool,
    pub registry_error: Option<String>,
    /// The version the alias pointed at when the history was drawn.
    pub version: Option<i64>,
    /// When the history was drawn (UTC): a move by hand after it is not in it.
    pub drawn_at: String,
    pub nights: Vec<NightRow>,
    pub versions: Vec<Version>,
    pub moves: Vec<Move>,
}

/// `2026-12-03T031700Z` → `2026-12-03 03:17:00 UTC` (a second night within the same second is
/// `2026-12-03T031700Z-01`); `None` for another name.
pub fn stamp_date(name: &str) -> Option<String> {
    if !name.is_ascii() {
        return None;
    }
    let suffix = name.get(18..).unwrap_or("");
    let numbered = suffix.is_empty()
        || (suffix.len() >= 2
            && suffix.starts_with('-')
            && suffix[1..].bytes().all(|c| c.is_ascii_digit()));
    if !numbered {
        return None;
    }
    let name = &name[..name.len().min(18)];
    let b = name.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    (b.len() == 18
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..17)
        && b[17] == b'Z')
        .then(|| {
            format!(
                "{} {}:{}:{} UTC",
                &name[..10],
                &name[11..13],
                &name[13..15],
                &name[15..17]
            )
        })
}

impl History {
    /// The history of the nights `summaries` holds (in their order); `log` is the alias read
    /// from the registry, when a model name was known.
    pub fn build(summaries: Vec<Summary>, log: Option<&AliasLog>) -> History {
        let own_moves: Vec<Option<&AliasMove>> =
            summaries.iter().map(|s| s.own_move.as_ref()).collect();
        let moves: Vec<Move> = log.map_or_else(Vec::new, |log| {
            log.moves
                .iter()
                .map(|m| Move {
                    r#move: m.clone(),
                    night: own_moves
                        .iter()
                        .position(|own| *own == Some(m))
                        .map(|i| summaries[i].row.night.clone()),
                })
                .collect()
        });
        let versions = log.map_or_else(Vec::new, |log| {
            log.entries
                .iter()
                .map(|e| Version {
                    version: e.version,
                    created_at: e.created_at.clone(),
                    manifest_hash: e.lineage.manifest_hash.clone(),
                    snapshot: e.lineage.snapshot.clone(),
                    code_commit: e.lineage.code_commit.clone(),
                    gate_passed: e.lineage.gate["passed"].as_bool(),
                    no_baseline: e.lineage.gate["no_baseline"].as_bool(),
                    auc: e.lineage.metrics["auc"].as_f64(),
                    ungated_reason: e.lineage.ungated_reason.clone(),
                    aliases: e.aliases.clone(),
                    night: summaries
                        .iter()
                        .find(|s| {
                            s.outcome
                                .registered
                                .as_ref()
                                .is_some_and(|r| r.version == e.version)
                                && s.row.manifest_hash.as_deref()
                                    == Some(e.lineage.manifest_hash.as_str())
                        })
                        .map(|s| s.row.night.clone()),
                })
                .collect()
        });
        // A move in a night's window that some other night made is that night's, not by hand.
        let by_hand: Vec<Vec<AliasMove>> = summaries
            .iter()
            .map(|s| {
                s.outcome
                    .prod
                    .moved_since
                    .iter()
                    .filter(|m| !own_moves.iter().flatten().any(|own| *own == *m))
                    .cloned()
                    .collect()
            })
            .collect();
        let rows = summaries
            .into_iter()
            .zip(by_hand)
            .map(|(summary, by_hand)| {
                let mut row = summary.row;
                for m in &by_hand {
                    row.alias.words.push_str("; by hand: ");
                    row.alias.words.push_str(&describe_move(m));
                }
                row.alias.by_hand = by_hand;
                row
            })
            .collect();
        History {
            alias: log.map(AliasLog::name),
            registry: log.map(|l| l.registry.clone()),
            registry_found: log.is_some_and(|l| l.found),
            registry_error: log.and_then(|l| l.error.clone()),
            version: log.and_then(|l| l.version),
            drawn_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            nights: rows,
            versions,
            moves,
        }
    }
}

fn folder_name(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The night's row; the moves made by hand in its window are added once every night's own
/// move is known (`History::build`).
fn row(night: &Night, outcome: &Outcome, own_move: Option<&AliasMove>) -> NightRow {
    let name = &folder_name(&night.dir);
    let date = stamp_date(name)
        .or_else(|| night.started_at.clone())
        .unwrap_or_else(|| name.to_string());
    let digest = night.data_digest.as_ref();
    let validate = furthest_with(night, "validate").map(|r| &r["validate"]);
    let snapshot = Snapshot {
        name: furthest_with(night, "manifest")
            .and_then(|r| r["manifest"]["data"]["snapshot"].as_str())
            .map(str::to_string),
        path: digest.and_then(|d| d["path"].as_str()).map(str::to_string),
        digest: digest
            .and_then(|d| d["digest"].as_str())
            .map(str::to_string),
        files: digest.and_then(|d| d["files"].as_u64()),
        bytes: digest.and_then(|d| d["bytes"].as_u64()),
        rows: validate.and_then(|v| v["profile"]["rows"].as_u64()),
    };
    let shards = furthest_with(night, "shards").map(|r| &r["shards"]);
    let splits = shards
        .and_then(|s| s["splits"].as_object())
        .map(|splits| {
            splits
                .iter()
                .map(|(split, s)| {
                    let resolved = &shards.map_or(&Value::Null, |s| &s["splits_resolved"])[split];
                    Split {
                        split: split.clone(),
                        rows: s["rows"].as_u64().unwrap_or(0),
                        after: resolved["after"].as_str().map(str::to_string),
                        until: resolved["until"].as_str().map(str::to_string),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let drift = validate
        .and_then(|v| v["checks"].as_array())
        .into_iter()
        .flatten()
        .filter(|c| c["passed"] == Value::Bool(false))
        .map(|c| Drift {
            check: c["name"].as_str().unwrap_or("?").to_string(),
            column: c["column"].as_str().map(str::to_string),
            value: c["value"].as_f64(),
            threshold: c["threshold"].as_f64(),
            explained: c["explained"].as_str().map(str::to_string),
            explained_until: c["explained_until"].as_str().map(str::to_string),
        })
        .collect();
    let leaks = furthest_with(night, "leaks")
        .and_then(|r| r["leaks"]["checks"].as_array())
        .into_iter()
        .flatten()
        .filter(|c| c["count"].as_f64().is_some_and(|n| n > 0.0) || c["passed"] == false)
        .map(|c| Leak {
            check: c["name"].as_str().unwrap_or("?").to_string(),
            count: c["count"].as_f64().unwrap_or(0.0),
            of: c["of"].as_f64(),
            passed: c["passed"] != Value::Bool(false),
            reason: c["reason"]
                .as_str()
                .or_else(|| c["setting"]["off"].as_str())
                .or_else(|| c["setting"]["reason"].as_str())
                .map(str::to_string),
        })
        .collect();
    let prod = &outcome.prod;
    let (moved, from, to) = match (&outcome.registered, prod.moved) {
        (Some(r), true) => (
            true,
            own_move.map_or(prod.before, |m| m.from_version),
            Some(r.version),
        ),
        _ => (false, None, None),
    };
    let stayed = (!moved).then_some(prod.before).flatten();
    let words = if moved {
        format!("{} → {}", version_words(from), version_words(to))
    } else if prod.alias.is_none() {
        "not looked up (no model name)".into()
    } else {
        match stayed {
            Some(v) => format!("unchanged ({})", version_words(Some(v))),
            None => "unchanged".into(),
        }
    };
    NightRow {
        night: name.to_string(),
        dir: night.dir.clone(),
        date,
        started_at: night.started_at.clone(),
        status: outcome.status,
        decision: outcome.decision,
        summary: outcome.summary.clone(),
        manifest_hash: night.manifest_hash.clone(),
        snapshot,
        splits,
        drift,
        leaks,
        gate: outcome.gate.clone(),
        registered: outcome.registered.clone(),
        alias: AliasChange {
            moved,
            from,
            to,
            stayed,
            by_hand: Vec::new(),
            words,
        },
        failed: outcome.failed.clone(),
        stale: night.skipped.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_as_dates() {
        assert_eq!(
            stamp_date("2026-12-03T031700Z").as_deref(),
            Some("2026-12-03 03:17:00 UTC")
        );
        assert_eq!(
            stamp_date("2026-12-03T031700Z-01").as_deref(),
            Some("2026-12-03 03:17:00 UTC")
        );
        assert_eq!(stamp_date("last-night"), None);
        assert_eq!(stamp_date("2026-12-03T031700Zx"), None);
        assert_eq!(stamp_date("2026-12-03T03:17Z"), None);
    }
}
