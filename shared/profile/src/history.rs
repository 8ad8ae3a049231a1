//! Drift judged against the data's own rhythm.
//!
//! With `validate.window` the snapshot is cut into windows of that length counted back from its
//! newest time value: window 0 is the newest, window 1 the one before it. Tonight's drift is
//! window 0 against window 1 (a reference that moves with the data, so a season that has moved
//! on is not compared with last winter for ever); values out of range and new categories are
//! judged against every window before (what was never seen, rather than what last week lacked).
//! Each drift check is then also measured for every earlier window against its own references
//! (k against k + 1, and against all windows after k): that history is what the check's
//! distance looks like when nothing is wrong, seasons and the column's usual wander included.
//! A check fails only when tonight's value is beyond its threshold, beyond sampling noise, and
//! beyond its history (a control chart, `runfn_stats::control_chart`, at `validate.alpha` with
//! Holm's correction over every drift check of the run). With too little history the last test
//! is skipped, and the record says so. The method is written down in docs/drift.md.

use std::collections::BTreeMap;

use rayon::prelude::*;
use runfn_data::label::Positive;
use runfn_data::read::{Piece, Snapshot};
use runfn_data::rolling::{Span, Unit, format_point};
use runfn_data::values::numeric_values;
use runfn_data::{ColumnType, DataError};
use runfn_schema::record::{Calibration, CheckHistory, WindowBounds};
use runfn_stats::control_chart::{Chart, MIN_HISTORY};
use runfn_stats::holm::holm;

use crate::check::Check;
use crate::compare::{Comparison, settled_checks};
use crate::explain::{Explanation, apply};
use crate::profile::{PIECE_ROWS, Profile, pieces};
use crate::scope::Roles;
use crate::settings::Thresholds;

/// Checks whose reference is everything before the window, not the window before it: a value
/// outside every earlier range, a category never seen.
const SEEN_BEFORE: &[&str] = &["out_of_range", "new_categories"];

/// Windows kept at most: three years of months, or a little over a year of weeks.
pub const MAX_WINDOWS: usize = 60;

/// A snapshot profiled whole and window by window.
#[derive(Debug, Clone)]
pub struct Windowed {
    pub whole: Profile,
    /// Newest first; window k holds the rows of `(start, end]`.
    pub windows: Vec<Window>,
    pub time_type: ColumnType,
    /// The oldest time in the snapshot: a window that starts before it is partial.
    pub earliest: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct Window {
    pub start: f64,
    pub end: f64,
    pub profile: Profile,
}

/// `validate.window`'s words as a span.
pub fn span(count: u32, unit: &str) -> Span {
    let unit = match unit {
        "day" => Unit::Day,
        "week" => Unit::Week,
        "year" => Unit::Year,
        _ => Unit::Month,
    };
    Span { count, unit }
}

/// Profiles `snapshot` whole and in windows of `span` counted back from `anchor` (the newest
/// value of `time`), in one pass over the data. Rows without a time, or older than
/// [`MAX_WINDOWS`] windows, count in the whole only.
#[allow(clippy::too_many_arguments)]
pub fn profile_windows(
    snapshot: &Snapshot,
    label: Option<&str>,
    positive: Option<&Positive>,
    identifiers: &[String],
    time: &str,
    span: Span,
    anchor: f64,
) -> Result<Windowed, DataError> {
    let pieces = pieces(snapshot, PIECE_ROWS)?;
    let roles = PieceRoles {
        label,
        positive,
        identifiers,
    };
    let cut = Some(Cut { time, span, anchor });
    let mut merged = PieceMerger::new(snapshot, &roles, cut)?;
    // Pieces are profiled a window at a time on all cores and merged in piece order as each
    // window ends, so what is held is a window's profiles, however many files the snapshot has.
    for window in pieces.chunks(crate::profile::pieces_at_once()) {
        for piece in profile_pieces(snapshot, &roles, cut, window)? {
            merged.add(&piece)?;
        }
    }
    merged.finish()
}

/// What a profile needs to know of the columns' roles.
#[derive(Debug, Clone, Copy)]
pub struct PieceRoles<'a> {
    pub label: Option<&'a str>,
    pub positive: Option<&'a Positive>,
    pub identifiers: &'a [String],
}

impl PieceRoles<'_> {
    fn empty(&self, snapshot: &Snapshot) -> Profile {
        Profile::empty(snapshot, self.label, self.positive, self.identifiers)
    }
}

/// How rows are cut into windows: by `time`, windows of `span` back from `anchor`.
#[derive(Debug, Clone, Copy)]
pub struct Cut<'a> {
    pub time: &'a str,
    pub span: Span,
    pub anchor: f64,
}

impl Cut<'_> {
    /// ends[k] closes window k; ends[k + 1] opens it.
    fn ends(&self) -> Vec<f64> {
        let mut ends = vec![self.anchor];
        while ends.len() <= MAX_WINDOWS {
            match self.span.before(*ends.last().unwrap_or(&self.anchor)) {
                Some(end) => ends.push(end),
                None => break,
            }
        }
        ends
    }
}

/// One piece of a snapshot profiled: whole, window by window (none without a cut), and its oldest
/// time. What a part of a parted run keeps per piece, to be merged in piece order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PieceProfile {
    pub whole: Profile,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<Profile>,
    pub earliest: Option<f64>,
}

/// Profiles each of `pieces` (in parallel), whole and, with `cut`, window by window.
pub fn profile_pieces(
    snapshot: &Snapshot,
    roles: &PieceRoles,
    cut: Option<Cut>,
    pieces: &[Piece],
) -> Result<Vec<PieceProfile>, DataError> {
    let ends = cut.map(|c| c.ends()).unwrap_or_default();
    let windows = ends.len().saturating_sub(1);
    let time_index =
        match cut {
            Some(cut) => Some(snapshot.schema.index_of(cut.time).map_err(|_| {
                DataError::Other(format!("the snapshot has no column `{}`", cut.time))
            })?),
            None => None,
        };
    pieces
        .par_iter()
        .map(|piece| {
            let mut whole = roles.empty(snapshot);
            let mut parts: Vec<Profile> = (0..windows).map(|_| roles.empty(snapshot)).collect();
            let mut earliest: Option<f64> = None;
            whole.open_piece(snapshot, piece);
            for typed in snapshot.read_piece(piece)? {
                let typed = typed?;
                whole.add_typed(&typed);
                let Some(time_index) = time_index else {
                    continue;
                };
                let batch = &typed.batch;
                let times = numeric_values(batch.column(time_index));
                for t in times.iter().flatten() {
                    earliest = Some(earliest.map_or(*t, |e| e.min(*t)));
                }
                let which: Vec<Option<usize>> = times
                    .into_iter()
                    .map(|t| t.and_then(|t| window_of(&ends, t)))
                    .collect();
                let mut present: Vec<usize> = which.iter().flatten().copied().collect();
                present.sort_unstable();
                present.dedup();
                for k in present {
                    let mask: arrow::array::BooleanArray =
                        which.iter().map(|w| Some(*w == Some(k))).collect();
                    let rows = arrow::compute::filter_record_batch(batch, &mask)
                        .map_err(|e| DataError::Other(e.to_string()))?;
                    parts[k].add_rows(&rows);
                }
            }
            Ok(PieceProfile {
                whole,
                windows: parts,
                earliest,
            })
        })
        .collect::<Vec<Result<_, DataError>>>()
        // The first failing piece in file order, so the error is the same on every run.
        .into_iter()
        .collect()
}

/// Merges the pieces' profiles in piece order into the snapshot's windows: the same result
/// whether the pieces were profiled by one process or by many.
pub fn merge_pieces(
    snapshot: &Snapshot,
    roles: &PieceRoles,
    cut: Option<Cut>,
    per_piece: Vec<PieceProfile>,
) -> Result<Windowed, DataError> {
    let mut merged = PieceMerger::new(snapshot, roles, cut)?;
    for piece in &per_piece {
        merged.add(piece)?;
    }
    merged.finish()
}

/// The snapshot's windowed profile, merged a piece at a time in piece order.
#[derive(Debug)]
pub struct PieceMerger {
    whole: Profile,
    parts: Vec<Profile>,
    ends: Vec<f64>,
    earliest: Option<f64>,
    time_type: ColumnType,
}

impl PieceMerger {
    pub fn new(
        snapshot: &Snapshot,
        roles: &PieceRoles,
        cut: Option<Cut>,
    ) -> Result<PieceMerger, DataError> {
        let ends = cut.map(|c| c.ends()).unwrap_or_default();
        let windows = ends.len().saturating_sub(1);
        let time_type = match cut {
            Some(cut) => snapshot.column_type(cut.time).ok_or_else(|| {
                DataError::Other(format!("the snapshot has no column `{}`", cut.time))
            })?,
            None => ColumnType::Timestamp,
        };
        Ok(PieceMerger {
            whole: roles.empty(snapshot),
            parts: (0..windows).map(|_| roles.empty(snapshot)).collect(),
            ends,
            earliest: None,
            time_type,
        })
    }

    /// The next piece, in piece order.
    pub fn add(&mut self, piece: &PieceProfile) -> Result<(), DataError> {
        self.whole.merge(&piece.whole).map_err(DataError::Other)?;
        if piece.windows.len() != self.parts.len() {
            return Err(DataError::Other(format!(
                "a piece was cut into {} windows where {} were expected",
                piece.windows.len(),
                self.parts.len()
            )));
        }
        for (part, piece_part) in self.parts.iter_mut().zip(&piece.windows) {
            part.merge(piece_part).map_err(DataError::Other)?;
        }
        if let Some(t) = piece.earliest {
            self.earliest = Some(self.earliest.map_or(t, |e| e.min(t)));
        }
        Ok(())
    }

    pub fn finish(self) -> Result<Windowed, DataError> {
        let ends = self.ends;
        let windows = self
            .parts
            .into_iter()
            .enumerate()
            .map(|(k, profile)| Window {
                start: ends[k + 1],
                end: ends[k],
                profile,
            })
            .collect();
        Ok(Windowed {
            whole: self.whole,
            windows,
            time_type: self.time_type,
            earliest: self.earliest,
        })
    }
}

/// Judges each check against the history of its values (`past`, by check and column): a check
/// beyond its threshold and sampling noise passes when its history makes it ordinary (Holm's
/// adjusted p-value above `alpha`, over every check with a history). Returns the checks and how
/// many had a history long enough to judge by.
fn calibrate(
    checks: Vec<Check>,
    past: &BTreeMap<(&'static str, Option<String>), Vec<f64>>,
    alpha: f64,
) -> (Vec<Check>, usize) {
    let charts: Vec<Option<Chart>> = checks
        .iter()
        .map(|c| {
            c.value?;
            Chart::fit(past.get(&(c.name, c.column.clone()))?)
        })
        .collect();
    let p_values: Vec<f64> = checks
        .iter()
        .zip(&charts)
        .map(|(c, chart)| match (chart, c.value) {
            (Some(chart), Some(value)) => chart.p_value(value),
            _ => f64::NAN,
        })
        .collect();
    let adjusted = holm(&p_values);
    let calibrated = charts.iter().filter(|c| c.is_some()).count();
    let judged = checks
        .into_iter()
        .zip(charts)
        .zip(p_values)
        .zip(adjusted)
        .map(|(((mut check, chart), p), p_holm)| {
            if let Some(chart) = chart {
                check.history = Some(CheckHistory {
                    windows: chart.windows,
                    mean: chart.mean,
                    sd: chart.sd,
                    p,
                    p_holm,
                });
                // Beyond threshold and noise, but no further than its history goes: ordinary.
                if !check.passed && p_holm > alpha {
                    check.passed = true;
                }
            }
            check
        })
        .collect();
    (judged, calibrated)
}

/// Served rows against what a model was trained on: `served`'s drift checks from `training`
/// (the whole training snapshot), each judged against how far the training snapshot's own
/// windows stand from that whole (its `windows`, kept when ds-validate cut it by
/// `validate.window`). A month like the training period's months, the model's own test
/// window among them, is ordinary; one that differs as none of them did is not. Returns the
/// checks and the number of windows behind the history, 0 when there were too few.
pub fn judge_served(
    training: &Profile,
    served: &Profile,
    thresholds: &Thresholds,
    roles: &Roles,
) -> (Vec<Check>, usize) {
    let checks = settled_checks(Some(training), served, thresholds, roles, None);
    if training.windows.len() < MIN_HISTORY {
        return (checks, 0);
    }
    let mut past: BTreeMap<(&'static str, Option<String>), Vec<f64>> = BTreeMap::new();
    for window in &training.windows {
        for check in settled_checks(Some(training), window, thresholds, roles, None) {
            if let Some(value) = check.value {
                past.entry((check.name, check.column.clone()))
                    .or_default()
                    .push(value);
            }
        }
    }
    let (checks, calibrated) = calibrate(checks, &past, thresholds.alpha);
    (
        checks,
        if calibrated > 0 {
            training.windows.len()
        } else {
            0
        },
    )
}

impl Windowed {
    /// The whole snapshot's profile with its full windows' profiles kept in it, for the
    /// profile file (and so for the registry, and `predict`).
    pub fn into_profile(self) -> Profile {
        let windows: Vec<Profile> = full_windows(&self.windows, self.earliest)
            .iter()
            .map(|w| w.profile.clone())
            .collect();
        Profile {
            windows,
            ..self.whole
        }
    }
}

/// The window `(ends[k + 1], ends[k]]` that holds `t`, if any.
fn window_of(ends: &[f64], t: f64) -> Option<usize> {
    // ends falls: the number of ends at or after t, less one.
    let at_or_after = ends.partition_point(|end| *end >= t);
    (at_or_after >= 1 && at_or_after < ends.len()).then(|| at_or_after - 1)
}

/// The windows that take part, newest first: tonight's window whatever its size, and every
/// earlier one that covers its whole span of time (the snapshot's first rows, at `earliest`,
/// came before it opened) and holds at least half the rows of the median window. A partial or
/// thin window (where the snapshot begins, a gap in the feed, a survey that skipped a month) is
/// left out rather than counted as ordinary, and the history goes on beyond it: each full
/// window is compared with the full window before it.
fn full_windows(windows: &[Window], earliest: Option<f64>) -> Vec<&Window> {
    let whole = |w: &Window| earliest.is_some_and(|e| e <= w.start);
    let mut sizes: Vec<u64> = windows
        .iter()
        .filter(|w| w.profile.rows > 0 && whole(w))
        .map(|w| w.profile.rows)
        .collect();
    sizes.sort_unstable();
    let Some(median) = sizes.get(sizes.len() / 2).copied() else {
        return windows.iter().take(1).collect();
    };
    windows
        .iter()
        .enumerate()
        .filter(|(k, w)| *k == 0 || (whole(w) && w.profile.rows * 2 >= median))
        .map(|(_, w)| w)
        .collect()
}

/// Checks a windowed snapshot: its own checks on the whole, drift of the newest window against
/// the one before it, each drift check judged against its history. `previous` (what serves)
/// adds only schema changes: its distributions are the training period's, which a season
/// leaves behind; `predict` watches serving drift.
pub fn judge(
    windowed: &Windowed,
    previous: Option<&Profile>,
    thresholds: &Thresholds,
    roles: &Roles,
    explanations: &[Explanation],
    today: &str,
    window_text: &str,
) -> Result<(Comparison, Calibration), String> {
    let full = full_windows(&windowed.windows, windowed.earliest);
    let [current, reference, ..] = full[..] else {
        return Err(format!(
            "the snapshot holds {} full window{} of {window_text} (`validate.window`); drift needs \
             at least two",
            full.len(),
            if full.len() == 1 { "" } else { "s" }
        ));
    };
    let mut checks = settled_checks(None, &windowed.whole, thresholds, roles, None);
    let own: Vec<(&'static str, Option<String>)> =
        checks.iter().map(|c| (c.name, c.column.clone())).collect();
    if let Some(previous) = previous {
        checks.extend(
            settled_checks(Some(previous), &windowed.whole, thresholds, roles, None)
                .into_iter()
                .filter(|c| c.name == "schema_change"),
        );
    }
    let is_drift =
        |c: &Check| !own.contains(&(c.name, c.column.clone())) && c.name != "schema_change";
    // Everything older than window k, for k from the oldest: what "seen before" means.
    let mut seen: Vec<Profile> = Vec::with_capacity(full.len());
    for window in full.iter().rev() {
        let mut merged = seen
            .last()
            .cloned()
            .unwrap_or_else(|| window.profile.clone());
        if !seen.is_empty() {
            merged.merge(&window.profile)?;
        }
        seen.push(merged);
    }
    seen.reverse();
    // seen[k] now holds windows k.. (oldest last); window k's past is seen[k + 1].
    let drift_of = |k: usize| -> Vec<Check> {
        let moved = settled_checks(
            Some(&full[k + 1].profile),
            &full[k].profile,
            thresholds,
            roles,
            Some(&windowed.whole),
        );
        let unseen = settled_checks(
            Some(&seen[k + 1]),
            &full[k].profile,
            thresholds,
            roles,
            Some(&windowed.whole),
        );
        // Distributions move against the window before; values and categories are new only
        // against everything before.
        moved
            .into_iter()
            .filter(|c| is_drift(c) && !SEEN_BEFORE.contains(&c.name))
            .chain(
                unseen
                    .into_iter()
                    .filter(|c| is_drift(c) && SEEN_BEFORE.contains(&c.name)),
            )
            .collect()
    };
    let tonight = drift_of(0);
    // The same checks between each earlier window and its own references.
    let mut past: BTreeMap<(&'static str, Option<String>), Vec<f64>> = BTreeMap::new();
    let pairs = full.len() - 2;
    for k in 1..=pairs {
        for check in drift_of(k) {
            if let Some(value) = check.value {
                past.entry((check.name, check.column.clone()))
                    .or_default()
                    .push(value);
            }
        }
    }
    let (tonight, calibrated) = calibrate(tonight, &past, thresholds.alpha);
    checks.extend(tonight);
    apply(&mut checks, explanations, today);
    let bounds = |w: &Window| WindowBounds {
        start: format_point(w.start, windowed.time_type),
        end: format_point(w.end, windowed.time_type),
        rows: w.profile.rows,
    };
    let method = if calibrated > 0 {
        "history"
    } else {
        "sampling"
    };
    let note = (pairs < MIN_HISTORY).then(|| {
        format!(
            "{pairs} earlier window pair{} of {window_text}: under the {MIN_HISTORY} a history \
             needs, so drift is judged against sampling noise and the thresholds only",
            if pairs == 1 { "" } else { "s" }
        )
    });
    Ok((
        Comparison::of(checks),
        Calibration {
            window: window_text.to_string(),
            current: bounds(current),
            reference: bounds(reference),
            history_windows: pairs,
            method: method.to_string(),
            min_history: MIN_HISTORY,
            note,
        },
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A year of hourly readings: a seasonal temperature (50 ± 25 °F over the year, ± 5 within
    /// a day's noise) and a wind speed that does not move; `unit_change_from` converts the
    /// temperature of every day from then on to Celsius.
    fn year(days: usize, unit_change_from: Option<usize>) -> Snapshot {
        year_with_gap(days, unit_change_from, 0..0, 24)
    }

    /// `year`, with the days in `gap` keeping only `gap_hours` readings a day (0: none).
    fn year_with_gap(
        days: usize,
        unit_change_from: Option<usize>,
        gap: std::ops::Range<usize>,
        gap_hours: usize,
    ) -> Snapshot {
        let dir = tempfile::tempdir().unwrap().keep();
        let mut text = String::from("time,temp,wind\n");
        let mut state = 7u64;
        let mut noise = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for day in 0..days {
            for hour in 0..24 {
                let season = (2.0 * std::f64::consts::PI * day as f64 / 365.0).sin();
                let mut temp = 50.0 + 25.0 * season + 10.0 * noise();
                if unit_change_from.is_some_and(|from| day >= from) {
                    temp = (temp - 32.0) * 5.0 / 9.0;
                }
                let wind = 10.0 + 8.0 * noise();
                if gap.contains(&day) && hour >= gap_hours {
                    continue;
                }
                let date = chrono_free_date(day);
                text.push_str(&format!("{date}T{hour:02}:00:00Z,{temp:.1},{wind:.1}\n"));
            }
        }
        std::fs::write(dir.join("rows.csv"), text).unwrap();
        Snapshot::open(&dir, &BTreeMap::new()).unwrap()
    }

    /// 2013's days as dates, without a date library in this crate.
    fn chrono_free_date(day: usize) -> String {
        let lengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let (mut month, mut left) = (0, day);
        while left >= lengths[month % 12] {
            left -= lengths[month % 12];
            month += 1;
        }
        format!(
            "{}-{:02}-{:02}",
            2013 + month / 12,
            month % 12 + 1,
            left + 1
        )
    }

    fn judged(snapshot: &Snapshot, explanations: &[Explanation]) -> (Comparison, Calibration) {
        let anchor = runfn_data::rolling::latest_time(snapshot, "time")
            .unwrap()
            .unwrap();
        let windowed =
            profile_windows(snapshot, None, None, &[], "time", span(2, "week"), anchor).unwrap();
        let thresholds = Thresholds {
            fail_on: crate::FailOn::All,
            ..Thresholds::default()
        };
        let roles = Roles {
            reserved: vec!["time".into()],
            ..Roles::default()
        };
        judge(
            &windowed,
            None,
            &thresholds,
            &roles,
            explanations,
            "2013-12-31",
            "2 weeks",
        )
        .unwrap()
    }

    fn temp_drift(comparison: &Comparison) -> &Check {
        comparison
            .checks
            .iter()
            .find(|c| c.name == "numeric_drift" && c.column.as_deref() == Some("temp"))
            .unwrap()
    }

    /// Spring warms the weather two weeks at a time: beyond sampling noise every time, and
    /// ordinary for its history. Without the history the same night fails.
    #[test]
    fn a_season_that_moves_as_it_always_has_is_not_drift() {
        let spring = year(150, None);
        let (comparison, calibration) = judged(&spring, &[]);
        assert!(comparison.passed, "{:?}", comparison.checks);
        assert_eq!(calibration.method, "history");
        // 150 days: ten windows of two weeks, and a partial one of ten days where the snapshot
        // begins, left out: nine pairs of windows, tonight's and eight before it.
        assert_eq!(calibration.history_windows, 8);
        assert_eq!(calibration.current.rows, 14 * 24);
        let drift = temp_drift(&comparison);
        assert!(drift.value.unwrap() > drift.noise.unwrap(), "{drift:?}");
        let history = drift.history.as_ref().unwrap();
        assert!(history.p_holm > 0.001, "{history:?}");
    }

    /// The same table with its newest two weeks in Celsius fails on the night it appears, an
    /// explanation of ordinary seasonal drift in force notwithstanding.
    #[test]
    fn a_unit_change_fails_the_night_it_appears() {
        let changed = year(150, Some(136));
        let season = Explanation {
            column: Some("temp".into()),
            check: "numeric_drift".into(),
            reason: "spring".into(),
            max_value: 1.0,
            until: "2099-01-01".into(),
        };
        let (comparison, _) = judged(&changed, &[season]);
        assert!(!comparison.passed);
        let drift = temp_drift(&comparison);
        assert!(!drift.passed && drift.explained.is_none(), "{drift:?}");
        assert!(drift.history.as_ref().unwrap().p_holm <= 0.001);
        assert!(
            drift.detail.as_deref().unwrap().contains("covers up to 1"),
            "{drift:?}"
        );
    }

    /// A survey that skipped a fortnight mid-history: the empty window is left out and the
    /// history goes on beyond it (it used to stop there, leaving 2 pairs where 7 remain).
    #[test]
    fn a_gap_in_the_history_is_skipped_not_the_end_of_it() {
        // Days 150 - 14·k close the windows: days 66..80 are the sixth window back, whole.
        let surveyed = year_with_gap(150, None, 66..80, 0);
        let (comparison, calibration) = judged(&surveyed, &[]);
        assert!(comparison.passed, "{:?}", comparison.checks);
        assert_eq!(calibration.method, "history");
        assert_eq!(calibration.history_windows, 7);
    }

    /// Tonight's window with a tenth of its rows (the feed went quiet) is still tonight: its
    /// drift is judged, the row count with it, instead of the snapshot being refused.
    #[test]
    fn a_thin_newest_window_is_judged_not_refused() {
        let outage = year_with_gap(150, None, 136..150, 2);
        let (comparison, calibration) = judged(&outage, &[]);
        assert_eq!(calibration.current.rows, 22 + 13 * 2 + 2);
        assert_eq!(calibration.history_windows, 8);
        let rows = comparison
            .checks
            .iter()
            .find(|c| c.name == "row_count_change")
            .unwrap();
        assert!(!rows.passed, "{rows:?}");
    }

    /// A history under four window pairs judges by sampling noise alone, and says so.
    #[test]
    fn too_little_history_falls_back_to_sampling_noise_and_says_so() {
        let short = year(84, None);
        let (comparison, calibration) = judged(&short, &[]);
        assert_eq!(calibration.method, "sampling");
        assert_eq!(calibration.history_windows, 3);
        assert!(calibration.note.as_deref().unwrap().contains("under the 4"));
        assert!(temp_drift(&comparison).history.is_none());
    }

    /// What serves, against a training snapshot that kept its windows: one of its own windows
    /// (the test month) is ordinary, though it differs from the whole beyond sampling noise;
    /// the same window in Celsius is not. Without the windows the test month alarms.
    #[test]
    fn served_rows_are_judged_against_the_training_windows() {
        let snapshot = year(180, None);
        let anchor = runfn_data::rolling::latest_time(&snapshot, "time")
            .unwrap()
            .unwrap();
        let windowed =
            profile_windows(&snapshot, None, None, &[], "time", span(2, "week"), anchor).unwrap();
        let test_window = windowed.windows[0].profile.clone();
        let training = windowed.into_profile();
        assert!(training.windows.len() >= MIN_HISTORY);
        let roles = Roles {
            reserved: vec!["time".into()],
            ..Roles::default()
        };
        let thresholds = Thresholds::default();
        let temp = |checks: &[Check]| {
            checks
                .iter()
                .find(|c| c.name == "numeric_drift" && c.column.as_deref() == Some("temp"))
                .cloned()
                .unwrap()
        };
        let (checks, windows) = judge_served(&training, &test_window, &thresholds, &roles);
        assert_eq!(windows, training.windows.len());
        let own = temp(&checks);
        assert!(own.passed, "{own:?}");
        assert!(
            own.value > own.noise,
            "the test month differs from the whole: {own:?}"
        );

        let whole_only = Profile {
            windows: Vec::new(),
            ..training.clone()
        };
        let (checks, windows) = judge_served(&whole_only, &test_window, &thresholds, &roles);
        assert_eq!(windows, 0);
        assert!(
            !temp(&checks).passed,
            "without windows the test month alarms"
        );

        let celsius = year(180, Some(166));
        let anchor = runfn_data::rolling::latest_time(&celsius, "time")
            .unwrap()
            .unwrap();
        let served = profile_windows(&celsius, None, None, &[], "time", span(2, "week"), anchor)
            .unwrap()
            .windows[0]
            .profile
            .clone();
        let (checks, _) = judge_served(&training, &served, &thresholds, &roles);
        assert!(!temp(&checks).passed);
    }

    #[test]
    fn rows_fall_in_the_window_that_closes_on_or_after_them() {
        let ends = [10.0, 7.0, 4.0];
        assert_eq!(window_of(&ends, 10.0), Some(0));
        assert_eq!(window_of(&ends, 7.5), Some(0));
        assert_eq!(window_of(&ends, 7.0), Some(1));
        assert_eq!(window_of(&ends, 4.0), None, "the oldest start is open");
        assert_eq!(window_of(&ends, 11.0), None);
    }
}
