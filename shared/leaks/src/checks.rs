//! Each leak check, from the merged scan.

use arrow::array::Array;
use arrow::temporal_conversions::timestamp_us_to_datetime;
use runfn_data::DataError;
use runfn_data::partitioned::Partitioned;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use crate::config::LeakConfig;
use crate::location::Loc;
use crate::movement::{Movement, movement_of, overdispersed_p};
use crate::near_twins::{ColumnSearch, NearTwin, read_text};
use crate::report::{LeakCheck, Pair};
use crate::scan::{Layout, Merged};
use runfn_data::spill_sort::{Record, SpillSorter, u32_at, u64_at};

/// Each split's place in time: its position in `config.split_order`, else after those.
pub fn ranks(data: &Partitioned, config: &LeakConfig) -> Vec<usize> {
    data.split_names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            config
                .split_order
                .iter()
                .position(|n| n == name)
                .unwrap_or(config.split_order.len() + index)
        })
        .collect()
}

/// The earliest split: the one every other is "later" than.
fn first_split(rank: &[usize]) -> Option<u8> {
    (0..rank.len()).min_by_key(|&i| rank[i]).map(|i| i as u8)
}

/// Rows of every split but the first.
fn later_rows(merged: &Merged, rank: &[usize]) -> u64 {
    let first = first_split(rank);
    merged
        .tallies
        .split_rows
        .iter()
        .enumerate()
        .filter(|(split, _)| Some(*split as u8) != first)
        .map(|(_, rows)| rows)
        .sum()
}

fn place(data: &Partitioned, loc: Loc) -> Value {
    json!({"file": runfn_storage::display(&data.snapshot.files[loc.file as usize].path), "row": loc.row})
}

fn split_name(data: &Partitioned, split: u8) -> &str {
    data.split_names
        .get(split as usize)
        .map_or("?", String::as_str)
}

fn time_text(micros: f64) -> String {
    timestamp_us_to_datetime(micros as i64).map_or_else(|| micros.to_string(), |t| t.to_string())
}

pub fn entity_overlap(
    merged: &Merged,
    data: &Partitioned,
    config: &LeakConfig,
    layout: &Layout,
) -> Result<LeakCheck, DataError> {
    let (Some(entity), Some(column)) = (&config.entity, layout.entity) else {
        return Ok(LeakCheck::skipped(
            "entity_overlap",
            "manifest.data.entity is not set",
        ));
    };
    let shown = &merged.entities.examples;
    let places: Vec<Loc> = shown.iter().map(|seen| seen.first[0].1).collect();
    let values = values_at(data, column, &places)?;
    let examples = shown
        .iter()
        .zip(values)
        .map(|(seen, value)| {
            json!({entity.as_str(): value, "splits": seen.first.iter().map(|(s, loc)| json!({"split": split_name(data, *s), "at": place(data, *loc)})).collect::<Vec<_>>()})
        })
        .collect();
    let first = first_split(&ranks(data, config));
    let mut check = LeakCheck::counted("entity_overlap", merged.entities.shared, examples);
    check.of = Some(merged.entities.outside(first));
    Ok(check)
}

/// The value of `column` at each of `places`, read back from the data: the scan keeps only
/// the keys' hashes, and the few examples are worth a second read of the files they are in,
/// up to their rows.
fn values_at(data: &Partitioned, column: usize, places: &[Loc]) -> Result<Vec<String>, DataError> {
    let mut values = vec![String::new(); places.len()];
    let mut by_file: BTreeMap<u32, Vec<(u64, usize)>> = BTreeMap::new();
    for (index, place) in places.iter().enumerate() {
        by_file
            .entry(place.file)
            .or_default()
            .push((place.row, index));
    }
    for (file, wanted) in by_file {
        let last = wanted.iter().map(|(row, _)| *row).max().unwrap_or(0);
        for typed in data.snapshot.read_file(file as usize)? {
            let typed = typed?;
            let rows = typed.batch.num_rows() as u64;
            let array = runfn_data::values::text_array(&typed.batch.columns()[column]);
            for &(row, index) in &wanted {
                // Places count data rows from 1.
                let at = row - 1;
                if (typed.first_row..typed.first_row + rows).contains(&at) {
                    let at = (at - typed.first_row) as usize;
                    if array.is_valid(at) {
                        values[index] = array.value(at).to_string();
                    }
                }
            }
            if typed.first_row + rows >= last {
                break;
            }
        }
    }
    Ok(values)
}

pub fn time_order(merged: &Merged, data: &Partitioned, config: &LeakConfig) -> LeakCheck {
    let Some(time) = &config.time else {
        return LeakCheck::skipped("time_order", "manifest.data.time is not set");
    };
    if !config.time_split {
        return LeakCheck::skipped(
            "time_order",
            format!("the splits are not ranges of `{time}`"),
        );
    }
    let ordered: Vec<(u8, (f64, f64))> = config
        .split_order
        .iter()
        .filter_map(|name| {
            let index = data.split_names.iter().position(|n| n == name)?;
            Some((
                index as u8,
                merged.tallies.time_ranges.get(index).copied().flatten()?,
            ))
        })
        .collect();
    let mut examples = Vec::new();
    for pair in ordered.windows(2) {
        let ((earlier, (_, earlier_max)), (later, (later_min, _))) = (pair[0], pair[1]);
        if earlier_max >= later_min {
            examples.push(json!({
                "earlier": split_name(data, earlier), "earlier_max": time_text(earlier_max),
                "later": split_name(data, later), "later_min": time_text(later_min),
            }));
        }
    }
    let mut check = LeakCheck::counted("time_order", examples.len() as u64, examples);
    check.of = Some(ordered.len().saturating_sub(1) as u64);
    check
}

/// Counts the rows of a later split whose features equal a row of an earlier split; with
/// `collect_pairs`, each such row paired with the first twin in every earlier split.
pub fn exact_duplicates(
    merged: &Merged,
    data: &Partitioned,
    config: &LeakConfig,
    pairs: &mut Vec<Pair>,
) -> LeakCheck {
    let rank = ranks(data, config);
    let count: u64 = merged.rows.later.iter().sum();
    pairs.extend(merged.rows.pairs.iter().map(|&(earlier, later)| Pair {
        check: "exact_duplicates",
        column: None,
        jaccard: None,
        earlier,
        later,
    }));
    let examples = merged
        .rows
        .examples
        .iter()
        .map(|seen| json!({"rows": seen.first.iter().map(|(s, loc)| json!({"split": split_name(data, *s), "at": place(data, *loc)})).collect::<Vec<_>>()}))
        .collect();
    let mut check = LeakCheck::counted("exact_duplicates", count, examples);
    check.of = Some(later_rows(merged, &rank));
    check.note = Some("rows of a later split equal to a row of an earlier split on every feature column (entity, time, label and as-of columns left out; text normalized)".into());
    check.chance = twins_by_chance(merged, data, &rank);
    check
}

/// The significance level of the twins-against-chance test: low, because a copied share shows
/// as a count many times what chance gives, while honest nights must not fail one in a hundred.
pub const CHANCE_ALPHA: f64 = 0.001;

/// What chance alone gives the later splits' exact twins. Coarse rows (a scheduled event on
/// another day) have twins by chance; the earliest split says how often: the share of its rows
/// with a twin among its other rows. A later split compared with `M` earlier rows has a twin by
/// chance with probability `1 - (1 - rate)^(M / (N - 1))`, `N` the earliest split's rows (exact
/// for rows of one kind, and no smaller than the truth for a mix, so the test errs towards
/// passing chance twins). Each later split's count is tested one-sided, Bonferroni over the
/// later splits: binomially, and where the rate moves between stretches of the earliest split
/// by more than sampling explains (a schedule that changes with the season), against that
/// movement too, the larger p-value deciding (see [`overdispersed_p`]).
fn twins_by_chance(
    merged: &Merged,
    data: &Partitioned,
    rank: &[usize],
) -> Option<runfn_schema::record::LeakChance> {
    let first = first_split(rank)? as usize;
    let rows = &merged.tallies.split_rows;
    let reference_rows = *rows.get(first)?;
    if reference_rows < 2 {
        return None;
    }
    let repeated = merged.rows.repeated_within.get(first).copied().unwrap_or(0);
    let rate = repeated as f64 / reference_rows as f64;
    let mut observed = vec![0u64; rows.len()];
    for (split, n) in merged.rows.later.iter().enumerate() {
        if let Some(slot) = observed.get_mut(split) {
            *slot += n;
        }
    }
    let later: Vec<usize> = (0..rows.len())
        .filter(|&s| s != first && rows[s] > 0)
        .collect();
    let tests = later.len().max(1) as f64;
    let movement = rate_movement(&merged.rows, first, rate);
    let (mut expected, mut p_value) = (0.0, 1.0f64);
    for &split in &later {
        let earlier: u64 = (0..rows.len())
            .filter(|&s| rank[s] < rank[split])
            .map(|s| rows[s])
            .sum();
        let chance = 1.0 - (1.0 - rate).powf(earlier as f64 / (reference_rows - 1) as f64);
        expected += chance * rows[split] as f64;
        let p =
            runfn_stats::binomial::at_least(observed[split], rows[split], chance.clamp(0.0, 1.0))
                .unwrap_or(0.0);
        let p = p.max(overdispersed_p(
            observed[split],
            rows[split],
            chance,
            movement,
        ));
        p_value = p_value.min((p * tests).min(1.0));
    }
    Some(runfn_schema::record::LeakChance {
        reference: split_name(data, first as u8).to_string(),
        rate,
        expected,
        observed: observed.iter().sum(),
        p_value,
        alpha: CHANCE_ALPHA,
        movement: movement.map(|m| m.sd),
    })
}

fn rate_movement(keys: &crate::keys::Keys, first: usize, rate: f64) -> Option<Movement> {
    let (rows, twins) = (keys.block_rows.get(first)?, keys.block_twins.get(first)?);
    let rates: Vec<(f64, u64)> = rows
        .iter()
        .zip(twins)
        .map(|(n, t)| (*t as f64 / (*n).max(1) as f64, *n))
        .collect();
    movement_of(&rates, rate)
}

/// Rows of a later split whose category (a text feature's value) the earliest split never has,
/// beyond what chance gives (see [`crate::categories`]), Bonferroni over every column and later
/// split tested. The count and `chance` are the strongest finding's; the examples list each
/// column and split with unseen rows.
pub fn unseen_categories(
    merged: &Merged,
    data: &Partitioned,
    layout: &Layout,
) -> Result<LeakCheck, DataError> {
    if layout.train.is_none() {
        return Ok(LeakCheck::skipped(
            "unseen_categories",
            "no train split to compare with",
        ));
    }
    if layout.categories.is_empty() {
        return Ok(LeakCheck::skipped(
            "unseen_categories",
            "no categorical feature",
        ));
    }
    let mut findings: Vec<crate::categories::Finding> = Vec::new();
    for ((name, _), column) in layout.categories.iter().zip(&merged.categories) {
        findings.extend(crate::categories::judge(name, column).map_err(|source| {
            DataError::Io {
                path: std::env::temp_dir(),
                source,
            }
        })?);
    }
    let tested = findings.iter().filter(|f| f.p < 1.0).count().max(1) as f64;
    let adjusted = |f: &crate::categories::Finding| (f.p * tested).min(1.0);
    let strongest = findings.iter().min_by(|a, b| {
        adjusted(a)
            .total_cmp(&adjusted(b))
            .then(b.unseen.cmp(&a.unseen))
    });
    let examples = findings
        .iter()
        .filter(|f| f.unseen > 0)
        .map(|f| crate::categories::example(f, split_name(data, f.split), adjusted(f)))
        .collect();
    let mut check = LeakCheck::counted(
        "unseen_categories",
        strongest.map_or(0, |f| f.unseen),
        examples,
    );
    check.of = strongest.map(|f| f.rows);
    check.note = Some(format!(
        "rows of a later split whose value of a categorical feature the train split never has (a renamed or new category the model cannot have learned), against what chance gives: the share of each run of train's rows (in file order) with a value no earlier run has; a split is tested when more than {:.0}% of its rows are unseen; a column with more than {} distinct values is an identifier and is not tested",
        crate::categories::MIN_SHARE * 100.0,
        crate::categories::MAX_DISTINCT
    ));
    check.chance = strongest.map(|f| runfn_schema::record::LeakChance {
        reference: layout
            .train
            .map_or("train", |t| split_name(data, t))
            .to_string(),
        rate: f.chance,
        expected: f.chance * f.rows as f64,
        observed: f.unseen,
        p_value: adjusted(f),
        alpha: CHANCE_ALPHA,
        movement: f.movement.map(|m| m.sd),
    });
    Ok(check)
}

/// A row of a later split with a near twin: its split, file and row, as the spill sorter
/// stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LaterRow {
    split: u8,
    file: u32,
    row: u64,
}

impl Record for LaterRow {
    const BYTES: usize = 13;

    fn write_to(&self, out: &mut Vec<u8>) {
        out.push(self.split);
        out.extend_from_slice(&self.file.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
    }

    fn read_from(bytes: &[u8]) -> LaterRow {
        LaterRow {
            split: bytes[0],
            file: u32_at(bytes, 1),
            row: u64_at(bytes, 5),
        }
    }
}

/// Counts the rows of a later split whose text is a near twin of an earlier split's; with
/// `collect_pairs`, every such pair.
pub fn near_duplicates(
    searches: Vec<ColumnSearch>,
    merged: &Merged,
    data: &Partitioned,
    config: &LeakConfig,
    pairs: &mut Vec<Pair>,
) -> Result<LeakCheck, DataError> {
    if config.text.is_empty() {
        return Ok(LeakCheck::skipped(
            "near_duplicates",
            "manifest.data.text names no text column",
        ));
    }
    let rank = ranks(data, config);
    // The later rows with a twin, sorted on disk past their share of the first column's
    // budget and counted once each: a row may have twins in several columns and earlier rows.
    let spill_error = |root: &std::path::Path| {
        let root = root.to_path_buf();
        move |source| DataError::Io {
            path: root.clone(),
            source,
        }
    };
    // One search per text column the layout resolved; none, and there is nothing to search.
    let Some(first) = searches.first() else {
        return Ok(LeakCheck::skipped(
            "near_duplicates",
            "no text column of manifest.data.text is in the snapshot",
        ));
    };
    let (first_root, first_budget) = (first.root().to_path_buf(), first.budget());
    let mut later_twins = SpillSorter::<LaterRow>::new(&first_root, first_budget / 4)
        .map_err(spill_error(&first_root))?;
    let mut skipped_buckets = 0;
    let mut examples = Vec::new();
    for ((column, search), stores) in config.text.iter().zip(searches).zip(&merged.texts) {
        let root = search.root().to_path_buf();
        let spilled = spill_error(&root);
        let loc = |id: u64| Loc {
            file: (id >> 40) as u32,
            row: (id & ((1 << 40) - 1)) + 1,
        };
        let wanted = config.examples.saturating_sub(examples.len());
        let mut first: Vec<NearTwin> = Vec::new();
        let found = search
            .search_each(stores, config.near_duplicate_jaccard, |pair| {
                let (a, b) = (
                    (pair.a.split as u8, loc(pair.a.id)),
                    (pair.b.split as u8, loc(pair.b.id)),
                );
                let (earlier, later) = if rank[a.0 as usize] <= rank[b.0 as usize] {
                    (a, b)
                } else {
                    (b, a)
                };
                later_twins.push(LaterRow {
                    split: later.0,
                    file: later.1.file,
                    row: later.1.row,
                })?;
                if config.collect_pairs {
                    pairs.push(Pair {
                        check: "near_duplicates",
                        column: Some(column.clone()),
                        jaccard: Some(pair.jaccard),
                        earlier,
                        later,
                    });
                }
                if first.len() < wanted {
                    first.push(pair.clone());
                }
                Ok(())
            })
            .map_err(&spilled)?;
        skipped_buckets += found.skipped_buckets;
        for pair in &first {
            let text_of = |text| read_text(stores, text).map_err(&spilled);
            examples.push(json!({
                "column": column,
                "jaccard": (pair.jaccard * 1000.0).round() / 1000.0,
                "a": {"split": split_name(data, pair.a.split as u8), "at": place(data, loc(pair.a.id)), "text": text_of(&pair.a)?},
                "b": {"split": split_name(data, pair.b.split as u8), "at": place(data, loc(pair.b.id)), "text": text_of(&pair.b)?},
            }));
        }
    }
    let mut distinct = 0u64;
    let mut last = None;
    for row in later_twins.sorted().map_err(spill_error(&first_root))? {
        let row = row.map_err(spill_error(&first_root))?;
        if last != Some(row) {
            distinct += 1;
            last = Some(row);
        }
    }
    let mut check = LeakCheck::counted("near_duplicates", distinct, examples);
    check.of = Some(later_rows(merged, &rank));
    let mut note = format!(
        "rows of a later split whose text is a near twin of an earlier split's: MinHash LSH over character 5-grams, pairs verified at Jaccard >= {}",
        config.near_duplicate_jaccard
    );
    if skipped_buckets > 0 {
        // Said, so a count from a partial search is never read as a full one.
        note += &format!(
            "; {skipped_buckets} LSH buckets of boilerplate texts were too large to compare pair by pair and were skipped, so twins found only through them are not counted"
        );
    }
    check.note = Some(note);
    Ok(check)
}

pub fn future_features(merged: &Merged, data: &Partitioned, config: &LeakConfig) -> LeakCheck {
    if config.as_of.is_empty() {
        return LeakCheck::skipped(
            "future_features",
            "manifest.data.as_of declares no feature timestamps",
        );
    }
    let Some(label_time) = config.label_time_column() else {
        return LeakCheck::skipped(
            "future_features",
            "no label time: set manifest.data.label_time or manifest.data.time",
        );
    };
    let examples = merged
        .tallies
        .future
        .iter()
        .take(config.examples)
        .map(|f| json!({"feature": f.feature, "at": place(data, f.loc), "as_of": time_text(f.as_of), label_time: time_text(f.label_time)}))
        .collect();
    let mut check = LeakCheck::counted("future_features", merged.tallies.future_count, examples);
    check.of = Some(merged.tallies.future_checked);
    check
}

pub fn label_proxies(
    merged: &Merged,
    layout: &Layout,
    data: &Partitioned,
    config: &LeakConfig,
) -> LeakCheck {
    if config.label.is_none() {
        return LeakCheck::skipped("label_proxy", "manifest.data.label is not set");
    }
    if !data.split_names.contains(&config.train_split) {
        return LeakCheck::skipped(
            "label_proxy",
            format!("there is no `{}` split", config.train_split),
        );
    }
    let mut examples = Vec::new();
    for (slot, (name, _, categorical)) in layout.proxies.iter().enumerate() {
        let (value, rows) = if *categorical {
            match merged.tallies.proxy_categories[slot].auc() {
                Some(scored) => scored,
                None => continue,
            }
        } else {
            merged.tallies.proxy_numeric_auc[slot].clone()
        };
        if let Ok(value) = value
            && (value >= config.proxy_auc || value <= 1.0 - config.proxy_auc)
        {
            examples.push(
                json!({"column": name, "auc": (value * 10000.0).round() / 10000.0, "rows": rows}),
            );
        }
    }
    let count = examples.len() as u64;
    let mut check = LeakCheck::counted("label_proxy", count, examples);
    check.of = Some(layout.proxies.len() as u64);
    check.note = Some(format!(
        "a single feature with univariate AUC >= {} or <= {} on `{}`",
        config.proxy_auc,
        ((1.0 - config.proxy_auc) * 1e6).round() / 1e6,
        config.train_split
    ));
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Coarse rows whose chance rate moves by two points between stretches of train: a later
    /// split two points above the mean is one more stretch, not a leak, though a binomial test
    /// alone calls it impossible; twelve points above is a leak under both.
    #[test]
    fn a_twin_rate_that_moves_with_the_data_is_judged_against_its_movement() {
        let movement = Some(Movement {
            sd: 0.02,
            blocks: 10,
        });
        let (rows, chance) = (10_000, 0.088);
        let binomial = runfn_stats::binomial::at_least(1_100, rows, chance).unwrap();
        assert!(binomial < 1e-9, "{binomial}");
        let moved = overdispersed_p(1_100, rows, chance, movement);
        assert!(moved > 0.05, "{moved}");
        let copied = overdispersed_p(2_000, rows, chance, movement);
        assert!(copied < 1e-3, "{copied}");
        // No movement: the binomial test alone decides.
        assert_eq!(overdispersed_p(1_100, rows, chance, None), 0.0);
    }
}
