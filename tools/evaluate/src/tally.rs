//! The evaluation of a split as it streams past. Each scored row goes, as it comes, to the row
//! scores file, the predictions file, the metrics' running sums (overall, per slice value,
//! without the twin rows), the sorter the AUCs and score bins are read from in score order,
//! the key check's sorter and the list of the most confident mistakes. What the tool holds is
//! one batch and what the budget lets the sorters keep; the rest waits sorted on disk.
//!
//! Every figure is the one the rows held in memory give, bit for bit: the sums run in the
//! rows' order as [`metrics::compute`]'s do, and the AUC is the same integer sum taken over
//! the sorted stream ([`SortedAuc`]).

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use runfn_data::spill_sort::{
    Record, SpillSorter, f64_from_order_key as from_order_key, f64_order_key as order_key, u32_at,
    u64_at,
};
use runfn_learn::metrics::{self, Metrics, MetricsTally};
use runfn_learn::score::Scored;
use runfn_schema::record::ScoreBins;
use runfn_stats::auc::SortedAuc;

/// The AUC group of every row, whatever its slices.
const OVERALL: u32 = 0;
/// The group of the rows without a twin in train (when the twins are counted).
const WITHOUT_TWINS: u32 = 1;
/// How many of the most confident wrong predictions are kept.
pub const MISTAKES: usize = 10;

/// A row in an AUC group: sorted by group, then by score (in [`f64::total_cmp`]'s order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Ranked {
    group: u32,
    score: u64,
    label: bool,
}

impl Record for Ranked {
    const BYTES: usize = 13;

    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.group.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
        out.push(u8::from(self.label));
    }

    fn read_from(bytes: &[u8]) -> Ranked {
        Ranked {
            group: u32_at(bytes, 0),
            score: u64_at(bytes, 4),
            label: bytes[12] == 1,
        }
    }
}

/// A row's key, by its 128-bit hash, and the row: equal hashes sort side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct KeySeen {
    hash: u128,
    row: u64,
}

impl Record for KeySeen {
    const BYTES: usize = 24;

    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
    }

    fn read_from(bytes: &[u8]) -> KeySeen {
        KeySeen {
            hash: u128::from_le_bytes(bytes[..16].try_into().expect("16 bytes")),
            row: u64_at(bytes, 16),
        }
    }
}

/// A wrong prediction: how sure the model was, and the row.
#[derive(Debug, Clone)]
pub struct Mistaken {
    pub row: u64,
    pub key: Option<String>,
    pub label: bool,
    pub score: f64,
    confidence: f64,
}

/// Where the row key is among the columns each batch carries.
#[derive(Debug, Clone)]
pub struct KeyColumn {
    /// Its position in the batch's columns.
    pub at: usize,
    /// Whether the row scores file is keyed by it (else by position).
    pub in_file: bool,
}

/// What the tally is asked to keep.
#[derive(Debug)]
pub struct Plan<'a> {
    /// Every column the batches carry (the slices, then the key when it is not a slice).
    pub columns: Vec<String>,
    /// The slice columns.
    pub slices: Vec<String>,
    pub key: Option<KeyColumn>,
    /// Each row's twin flag, for the rows without twins.
    pub twins: Option<Vec<bool>>,
    /// Keep every score and label in memory (for the bootstrap, which resamples them).
    pub keep_rows: bool,
    /// The budget the sorters share.
    pub memory: u64,
    pub spill: &'a Path,
}

/// The running evaluation.
pub struct Tally<'a, W: Write + Send> {
    plan: Plan<'a>,
    /// For each slice (in `plan.slices` order): its position in the batch and its values' groups.
    slice_groups: Vec<(usize, HashMap<String, u32>)>,
    groups: Vec<MetricsTally>,
    ranked: SpillSorter<Ranked>,
    keys: Option<SpillSorter<KeySeen>>,
    mistakes: Vec<Mistaken>,
    rows: u64,
    row_scores: runfn_data::row_scores::RowScoresWriter<W>,
    predictions: Option<BufWriter<std::fs::File>>,
    kept: (Vec<f64>, Vec<bool>),
}

/// What the tally found.
#[derive(Debug)]
pub struct Tallied {
    pub rows: u64,
    pub overall: Metrics,
    pub without_twins: Option<Metrics>,
    pub twin_rows: u64,
    pub slices: std::collections::BTreeMap<String, std::collections::BTreeMap<String, Metrics>>,
    pub score_bins: ScoreBins,
    /// The most confident wrong predictions, the most confident first (ties: the earlier row).
    pub mistakes: Vec<Mistaken>,
    /// Rows whose key hashes the same as an earlier row's, the earliest repeats first: the key
    /// check reads their texts back to name the value.
    pub repeated_keys: Vec<(u64, u64)>,
    /// Every score and label, when the plan kept them.
    pub kept: (Vec<f64>, Vec<bool>),
}

/// How many suspected repeats of a key are kept to be read back (a 128-bit hash that collides
/// is not a repeat, so more than one is kept).
const REPEATS_KEPT: usize = 8;

impl<'a, W: Write + Send> Tally<'a, W> {
    pub fn new(
        plan: Plan<'a>,
        row_scores: runfn_data::row_scores::RowScoresWriter<W>,
        predictions: Option<std::fs::File>,
    ) -> std::io::Result<Tally<'a, W>> {
        let slice_groups = plan
            .slices
            .iter()
            .map(|slice| {
                let at = plan
                    .columns
                    .iter()
                    .position(|c| c == slice)
                    .expect("every slice is a column the batches carry");
                (at, HashMap::new())
            })
            .collect();
        // The AUC rows take half the budget, the keys a quarter; the rest is the batch, the
        // row scores file's pending group and the groups' sums.
        let ranked = SpillSorter::new(plan.spill, plan.memory / 2)?;
        let keys = match &plan.key {
            Some(_) => Some(SpillSorter::new(plan.spill, plan.memory / 4)?),
            None => None,
        };
        let mut predictions = predictions.map(BufWriter::new);
        if let Some(out) = &mut predictions {
            writeln!(out, "row,label,score")?;
        }
        Ok(Tally {
            plan,
            slice_groups,
            groups: vec![MetricsTally::default(); 2],
            ranked,
            keys,
            mistakes: Vec::new(),
            rows: 0,
            row_scores,
            predictions,
            kept: (Vec::new(), Vec::new()),
        })
    }

    /// The next batch of scored rows (its slices: the plan's columns, in order).
    pub fn push(&mut self, batch: &Scored) -> anyhow::Result<()> {
        let mut groups = Vec::with_capacity(self.slice_groups.len());
        for i in 0..batch.scores.len() {
            let row = self.rows + i as u64;
            let (score, label) = (batch.scores[i], batch.labels[i]);
            let key = self
                .plan
                .key
                .as_ref()
                .map(|k| batch.slices[k.at].1[i].as_str());
            let file_key = self.plan.key.as_ref().filter(|k| k.in_file).and(key);
            self.row_scores.push(
                row,
                file_key,
                label,
                score,
                self.slice_groups
                    .iter()
                    .map(|(at, _)| batch.slices[*at].1[i].as_str()),
            )?;
            if let Some(out) = &mut self.predictions {
                writeln!(
                    out,
                    "{row},{},{}",
                    u8::from(label),
                    ryu_js::Buffer::new().format(score)
                )?;
            }
            groups.clear();
            groups.push(OVERALL);
            let twin = self
                .plan
                .twins
                .as_ref()
                .is_some_and(|twins| twins[row as usize]);
            if self.plan.twins.is_some() && !twin {
                groups.push(WITHOUT_TWINS);
            }
            for (at, values) in &mut self.slice_groups {
                let value = &batch.slices[*at].1[i];
                let next = self.groups.len() as u32;
                let group = match values.get(value) {
                    Some(&group) => group,
                    None => {
                        values.insert(value.clone(), next);
                        self.groups.push(MetricsTally::default());
                        next
                    }
                };
                groups.push(group);
            }
            for &group in &groups {
                self.groups[group as usize].push(score, label);
                self.ranked.push(Ranked {
                    group,
                    score: order_key(score),
                    label,
                })?;
            }
            if let (Some(keys), Some(key)) = (&mut self.keys, key) {
                let hash = blake3::hash(key.as_bytes());
                let hash = u128::from_le_bytes(hash.as_bytes()[..16].try_into().expect("16"));
                keys.push(KeySeen { hash, row })?;
            }
            self.note_mistake(row, key, label, score);
            if self.plan.keep_rows {
                self.kept.0.push(score);
                self.kept.1.push(label);
            }
        }
        self.rows += batch.scores.len() as u64;
        Ok(())
    }

    /// Keeps the row among the most confident mistakes when it is one of them.
    fn note_mistake(&mut self, row: u64, key: Option<&str>, label: bool, score: f64) {
        if label == (score >= metrics::THRESHOLD) {
            return;
        }
        let confidence = (if label { 1.0 } else { 0.0 } - score).abs();
        // Rows come in order, so a later row ties behind every kept one.
        let at = self
            .mistakes
            .partition_point(|kept| kept.confidence.total_cmp(&confidence).is_ge());
        if at >= MISTAKES {
            return;
        }
        self.mistakes.insert(
            at,
            Mistaken {
                row,
                key: key.map(str::to_string),
                label,
                score,
                confidence,
            },
        );
        self.mistakes.truncate(MISTAKES);
    }

    /// Ends the row scores file (the rows digest goes in its footer) and the predictions, and
    /// reads the sorted groups for the AUCs and the score bins.
    pub fn finish(self, rows_blake3: &str) -> anyhow::Result<(Tallied, W)> {
        let out = self.row_scores.finish(rows_blake3)?;
        if let Some(mut predictions) = self.predictions {
            predictions.flush()?;
        }
        let repeated_keys = match self.keys {
            Some(keys) => repeats(keys)?,
            None => Vec::new(),
        };
        let (aucs, score_bins) = aucs_and_bins(self.ranked, self.groups.len(), self.rows)?;
        let mut aucs = aucs.into_iter();
        let mut finished = self
            .groups
            .iter()
            .map(|group| group.finish(aucs.next().expect("an AUC per group")));
        let overall = finished.next().expect("the overall group");
        let without = finished.next().expect("the group without twins");
        let rest: Vec<Metrics> = finished.collect();
        let twin_rows = self.rows - self.groups[WITHOUT_TWINS as usize].rows();
        let slices = self
            .plan
            .slices
            .iter()
            .zip(&self.slice_groups)
            .map(|(column, (_, values))| {
                let by_value = values
                    .iter()
                    .map(|(value, &group)| (value.clone(), rest[group as usize - 2].clone()))
                    .collect();
                (column.clone(), by_value)
            })
            .collect();
        let tallied = Tallied {
            rows: self.rows,
            overall,
            without_twins: (self.plan.twins.is_some()
                && self.groups[WITHOUT_TWINS as usize].rows() > 0)
                .then_some(without),
            twin_rows: if self.plan.twins.is_some() {
                twin_rows
            } else {
                0
            },
            slices,
            score_bins,
            mistakes: self.mistakes,
            repeated_keys,
            kept: self.kept,
        };
        Ok((tallied, out))
    }
}

/// Each group's AUC, from its rows in score order, and the overall group's score bins
/// ([`ScoreBins::of`]'s deciles and counts, taken as the sorted scores pass).
fn aucs_and_bins(
    ranked: SpillSorter<Ranked>,
    groups: usize,
    rows: u64,
) -> anyhow::Result<(Vec<Result<f64, runfn_stats::auc::AucError>>, ScoreBins)> {
    let mut tallies = vec![SortedAuc::default(); groups];
    // The bins' edges are the scores at ranks i·(n−1)/10; a score's bin is the number of
    // edges below it, all of which the sorted stream has passed by then.
    let edge_rank = |i: u64| i * rows.saturating_sub(1) / 10;
    let (mut edges, mut counts, mut next_edge, mut rank) = (Vec::<f64>::new(), vec![0u64], 0, 0);
    for ranked in ranked.sorted()? {
        let ranked = ranked?;
        let score = from_order_key(ranked.score);
        tallies[ranked.group as usize].push(score, ranked.label);
        if ranked.group != OVERALL {
            continue;
        }
        while next_edge <= 10 && edge_rank(next_edge) == rank {
            if edges.last() != Some(&score) {
                edges.push(score);
                counts.push(0);
            }
            next_edge += 1;
        }
        counts[edges.partition_point(|edge| *edge < score)] += 1;
        rank += 1;
    }
    let aucs = tallies.into_iter().map(SortedAuc::finish).collect();
    Ok((aucs, ScoreBins { edges, counts }))
}

/// The rows whose key hash repeats an earlier row's, paired with that earlier row, the
/// earliest repeats first.
fn repeats(keys: SpillSorter<KeySeen>) -> std::io::Result<Vec<(u64, u64)>> {
    let mut found: Vec<(u64, u64)> = Vec::new();
    let mut last: Option<KeySeen> = None;
    for seen in keys.sorted()? {
        let seen = seen?;
        match last {
            Some(first) if first.hash == seen.hash => {
                found.push((first.row, seen.row));
                found.sort_by_key(|pair| pair.1);
                found.truncate(REPEATS_KEPT);
            }
            _ => last = Some(seen),
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runfn_data::row_scores::RowScores;

    /// Rows with ties (scores on a grid of 200), two slice columns and a key.
    struct Rows {
        scores: Vec<f64>,
        labels: Vec<bool>,
        tier: Vec<String>,
        region: Vec<String>,
        keys: Vec<String>,
        twins: Vec<bool>,
    }

    fn rows(n: usize) -> Rows {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut out = Rows {
            scores: Vec::new(),
            labels: Vec::new(),
            tier: Vec::new(),
            region: Vec::new(),
            keys: Vec::new(),
            twins: Vec::new(),
        };
        for i in 0..n {
            let score = (next() % 201) as f64 / 200.0;
            out.labels.push((next() % 1000) as f64 / 1000.0 < score);
            out.scores.push(score);
            out.tier.push(format!("t{}", next() % 4));
            // One value holds a single class, so its AUC is null with a note.
            out.region.push(if i % 97 == 0 {
                "lone".into()
            } else {
                format!("r{}", next() % 3)
            });
            out.keys.push(format!("id-{i}"));
            out.twins.push(next() % 10 == 0);
        }
        for i in (0..n).filter(|i| i % 97 == 0) {
            out.labels[i] = true;
        }
        out
    }

    /// The rows held in memory, as `metrics::compute` and friends see them.
    fn confident_mistakes(scores: &[f64], labels: &[bool], k: usize) -> Vec<u64> {
        let mut wrong: Vec<(f64, u64)> = scores
            .iter()
            .zip(labels)
            .enumerate()
            .filter(|(_, (s, l))| **l != (**s >= metrics::THRESHOLD))
            .map(|(i, (s, l))| ((if *l { 1.0 } else { 0.0 } - s).abs(), i as u64))
            .collect();
        wrong.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        wrong.into_iter().take(k).map(|(_, i)| i).collect()
    }

    fn subset(rows: &Rows, keep: impl Fn(usize) -> bool) -> Metrics {
        let (s, l): (Vec<f64>, Vec<bool>) = (0..rows.scores.len())
            .filter(|&i| keep(i))
            .map(|i| (rows.scores[i], rows.labels[i]))
            .unzip();
        metrics::compute(&s, &l)
    }

    fn tally(rows: &Rows, memory: u64, batch: usize) -> (Tallied, Vec<u8>) {
        let spill = tempfile::tempdir().unwrap();
        let plan = Plan {
            columns: vec!["tier".into(), "region".into(), "id".into()],
            slices: vec!["tier".into(), "region".into()],
            key: Some(KeyColumn {
                at: 2,
                in_file: true,
            }),
            twins: Some(rows.twins.clone()),
            keep_rows: false,
            memory,
            spill: spill.path(),
        };
        let writer = runfn_data::row_scores::RowScoresWriter::new(
            Vec::new(),
            "test",
            Some("id"),
            vec!["tier".into(), "region".into()],
        )
        .unwrap();
        let mut tally = Tally::new(plan, writer, None).unwrap();
        let n = rows.scores.len();
        for start in (0..n).step_by(batch) {
            let end = (start + batch).min(n);
            tally
                .push(&Scored {
                    scores: rows.scores[start..end].to_vec(),
                    labels: rows.labels[start..end].to_vec(),
                    slices: vec![
                        ("tier".into(), rows.tier[start..end].to_vec()),
                        ("region".into(), rows.region[start..end].to_vec()),
                        ("id".into(), rows.keys[start..end].to_vec()),
                    ],
                    unseen: Vec::new(),
                })
                .unwrap();
        }
        let (tallied, bytes) = tally.finish(&"ab".repeat(32)).unwrap();
        assert_eq!(
            std::fs::read_dir(spill.path()).unwrap().count(),
            0,
            "the spilled runs go"
        );
        (tallied, bytes)
    }

    /// Spilled to disk (a budget of nothing) or held, in batches of any size, the tally gives
    /// what the rows held in memory give, bit for bit, and the same row scores file.
    #[test]
    fn streamed_rows_give_what_rows_held_in_memory_give() {
        let rows = rows(20_000);
        let held = RowScores {
            split: "test".into(),
            rows_blake3: "ab".repeat(32),
            key_column: Some("id".into()),
            rows: (0..rows.scores.len() as u64).collect(),
            keys: Some(rows.keys.clone()),
            labels: rows.labels.clone(),
            scores: rows.scores.clone(),
            slices: vec![
                ("tier".into(), rows.tier.clone()),
                ("region".into(), rows.region.clone()),
            ],
        };
        let dir = tempfile::tempdir().unwrap();
        held.write(&dir.path().join("held.parquet")).unwrap();
        let held_bytes = std::fs::read(dir.path().join("held.parquet")).unwrap();
        for (memory, batch) in [(0, 777), (1 << 30, 4096), (0, 20_000)] {
            let (tallied, bytes) = tally(&rows, memory, batch);
            assert_eq!(bytes, held_bytes, "the row scores file at {memory} bytes");
            assert_eq!(
                tallied.overall,
                metrics::compute(&rows.scores, &rows.labels)
            );
            assert_eq!(
                tallied.without_twins,
                Some(subset(&rows, |i| !rows.twins[i]))
            );
            assert_eq!(
                tallied.twin_rows,
                rows.twins.iter().filter(|t| **t).count() as u64
            );
            for (column, values) in [("tier", &rows.tier), ("region", &rows.region)] {
                let by_value = &tallied.slices[column];
                let mut distinct: Vec<&String> = values.iter().collect();
                distinct.sort();
                distinct.dedup();
                assert_eq!(by_value.len(), distinct.len());
                for value in distinct {
                    assert_eq!(
                        by_value[value],
                        subset(&rows, |i| &values[i] == value),
                        "{column}={value}"
                    );
                }
            }
            assert!(tallied.slices["region"]["lone"].auc.is_none());
            assert_eq!(tallied.score_bins, ScoreBins::of(&rows.scores));
            let mistakes: Vec<u64> = tallied.mistakes.iter().map(|m| m.row).collect();
            assert_eq!(
                mistakes,
                confident_mistakes(&rows.scores, &rows.labels, MISTAKES)
            );
            assert!(tallied.repeated_keys.is_empty());
        }
    }

    /// A key twice is found with its earlier row, the earliest repeat first.
    #[test]
    fn repeated_keys_are_found_earliest_repeat_first() {
        let mut rows = rows(5_000);
        rows.keys[4_000] = rows.keys[10].clone();
        rows.keys[3_000] = rows.keys[2_999].clone();
        let (tallied, _) = tally(&rows, 0, 500);
        assert_eq!(tallied.repeated_keys, [(2_999, 3_000), (10, 4_000)]);
    }
}
