//! Scoring a snapshot's files with a model, a batch at a time, into a predictions file, with
//! what a part and the merge both need counted: unseen categories, missing values, score bins.

use runfn_data::read::Snapshot;
use runfn_learn::score;
use runfn_schema::record::ScoreBins;

use crate::output::Predictions;

/// What scores a snapshot's files: the model, its preprocessing, the batch size.
pub struct Scoring<'a> {
    pub snapshot: &'a Snapshot,
    pub preprocess: &'a runfn_learn::features::Preprocess,
    pub model: &'a runfn_learn::model::Mlp,
    pub device: runfn_learn::tch::Device,
    pub features: &'a [&'a str],
    pub batch_rows: usize,
    /// The test scores' bin edges, where the registry kept them.
    pub score_edges: Option<&'a [f64]>,
}

/// What scoring counted: rows of each categorical feature whose value the model never saw,
/// rows missing each feature, the scores in the test scores' bins.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub unseen: Vec<u64>,
    pub missing: Vec<u64>,
    pub bins: Option<Vec<u64>>,
}

impl Counts {
    /// Adds another part's counts.
    pub fn add(&mut self, other: &Counts) {
        for (total, count) in self.unseen.iter_mut().zip(&other.unseen) {
            *total += count;
        }
        for (total, count) in self.missing.iter_mut().zip(&other.missing) {
            *total += count;
        }
        if let (Some(bins), Some(more)) = (&mut self.bins, &other.bins) {
            for (total, count) in bins.iter_mut().zip(more) {
                *total += count;
            }
        }
    }
}

impl Scoring<'_> {
    pub fn empty_counts(&self) -> Counts {
        Counts {
            unseen: vec![0; self.preprocess.categorical.len()],
            missing: vec![0; self.features.len()],
            bins: self.score_edges.map(|edges| vec![0; edges.len() + 1]),
        }
    }

    /// Scores `files` (positions in the snapshot), in order, into `out`, a batch at a time;
    /// with `group_per_batch` each batch ends a row group (a part's file, which the merge
    /// reads back batch by batch).
    pub fn score_files(
        &self,
        files: &[usize],
        out: &mut Predictions,
        group_per_batch: bool,
    ) -> anyhow::Result<Counts> {
        let lookup = self.preprocess.lookup();
        let mut counts = self.empty_counts();
        for &file in files {
            let path = self.snapshot.files[file].path.clone();
            for batch in self.snapshot.read_file_in(file, self.batch_rows)? {
                let batch = batch?;
                let first_row = batch.first_row + 1;
                let block = self
                    .preprocess
                    .inputs(&lookup, &batch.batch, &path, first_row)?;
                let scores =
                    score::probabilities(self.model, &block, self.device, &path, first_row)?;
                for (total, count) in counts.unseen.iter_mut().zip(self.preprocess.count_unseen(
                    &lookup,
                    &batch.batch,
                    &path,
                )?) {
                    *total += count;
                }
                for (total, name) in counts.missing.iter_mut().zip(self.features) {
                    *total += batch
                        .batch
                        .column_by_name(name)
                        .map_or(0, |c| c.null_count() as u64);
                }
                if let (Some(edges), Some(bins)) = (self.score_edges, &mut counts.bins) {
                    for (total, count) in bins.iter_mut().zip(ScoreBins::count(edges, &scores)) {
                        *total += count;
                    }
                }
                out.push(&batch.batch, &scores)?;
                if group_per_batch {
                    out.end_row_group()?;
                }
            }
        }
        Ok(counts)
    }
}
