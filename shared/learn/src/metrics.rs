//! Binary-classification metrics, each computed the textbook way so it can be checked against
//! an independent implementation: AUC as the exact rank statistic with ties counted half,
//! log loss with probabilities clipped to [1e-15, 1 - 1e-15], Brier score, expected calibration
//! error over 10 equal-width bins, accuracy and the predicted-positive rate at 0.5.

use std::collections::BTreeMap;

use rayon::prelude::*;

use crate::seeds;
use runfn_stats::percentile::percentile;

pub const ECE_BINS: usize = 10;
pub const THRESHOLD: f64 = 0.5;
const CLIP: f64 = 1e-15;

/// Metrics of scores against labels, as the record holds them (`evaluate.overall`, `train.val`).
pub use runfn_schema::record::EvalMetrics as Metrics;

/// Metrics of `scores` (probabilities) against `labels`. Both must be non-empty and equally long.
pub fn compute(scores: &[f64], labels: &[bool]) -> Metrics {
    assert_eq!(scores.len(), labels.len());
    let mut tally = MetricsTally::default();
    for (&p, &y) in scores.iter().zip(labels) {
        tally.push(p, y);
    }
    tally.finish(runfn_stats::auc::auc(scores, labels))
}

/// Expected calibration error: the row-weighted mean over 10 equal-width score bins of
/// |mean score - label rate|. A score of exactly 1 falls in the last bin.
pub fn ece(scores: &[f64], labels: &[bool]) -> f64 {
    let mut tally = MetricsTally::default();
    for (&p, &y) in scores.iter().zip(labels) {
        tally.push(p, y);
    }
    tally.ece()
}

/// Every metric but the AUC, summed a row at a time in the rows' order, so rows streamed
/// through it give bit for bit what [`compute`] gives on them held in memory. The AUC needs
/// the rows in score order and comes from elsewhere ([`runfn_stats::auc::SortedAuc`] over a
/// sorter, or [`runfn_stats::auc::auc`]).
#[derive(Debug, Clone, Default)]
pub struct MetricsTally {
    rows: u64,
    logloss: f64,
    brier: f64,
    correct: u64,
    predicted: u64,
    positives: u64,
    score_sum: f64,
    bin_score: [f64; ECE_BINS],
    bin_label: [f64; ECE_BINS],
    bin_rows: [u64; ECE_BINS],
}

impl MetricsTally {
    /// One row: its probability `p` and its label `y`.
    pub fn push(&mut self, p: f64, y: bool) {
        let label = if y { 1.0 } else { 0.0 };
        let q = p.clamp(CLIP, 1.0 - CLIP);
        self.logloss -= label * q.ln() + (1.0 - label) * (1.0 - q).ln();
        self.brier += (p - label) * (p - label);
        let call = p >= THRESHOLD;
        self.predicted += u64::from(call);
        self.positives += u64::from(y);
        self.correct += u64::from(call == y);
        self.score_sum += p;
        let bin = ((p * ECE_BINS as f64) as usize).min(ECE_BINS - 1);
        self.bin_score[bin] += p;
        self.bin_label[bin] += label;
        self.bin_rows[bin] += 1;
        self.rows += 1;
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn ece(&self) -> f64 {
        let n = self.rows as f64;
        // A float sum starts at -0.0: no rows would print `"ece": -0.0`.
        0.0 + (0..ECE_BINS)
            .filter(|&b| self.bin_rows[b] > 0)
            .map(|b| (self.bin_score[b] - self.bin_label[b]).abs() / n)
            .sum::<f64>()
    }

    /// The metrics of the rows pushed, with `auc` the AUC of the same rows (an error: null,
    /// with the error as the note).
    pub fn finish(&self, auc: Result<f64, runfn_stats::auc::AucError>) -> Metrics {
        let n = self.rows as f64;
        let (auc, auc_note) = match auc {
            Ok(auc) => (Some(auc), None),
            Err(e) => (None, Some(e.to_string())),
        };
        Metrics {
            auc,
            auc_note,
            logloss: self.logloss / n,
            brier: self.brier / n,
            ece: self.ece(),
            accuracy: self.correct as f64 / n,
            positive_rate: self.predicted as f64 / n,
            label_rate: self.positives as f64 / n,
            mean_score: self.score_sum / n,
            rows: self.rows,
            ci95: None,
        }
    }
}

/// Reads one metric of a bootstrap replicate.
type MetricOf = fn(&Metrics) -> Option<f64>;

/// 95% percentile intervals from `replicates` bootstrap resamples of the rows, seeded so that
/// the same inputs give the same intervals.
pub fn bootstrap(
    scores: &[f64],
    labels: &[bool],
    replicates: usize,
    seed: u64,
) -> BTreeMap<String, [f64; 2]> {
    let n = scores.len();
    let samples: Vec<Metrics> = (0..replicates as u64)
        .into_par_iter()
        .map(|r| {
            use rand::RngExt;
            let mut rng = seeds::rng(seed, "bootstrap", &[r]);
            let (mut s, mut l) = (Vec::with_capacity(n), Vec::with_capacity(n));
            for _ in 0..n {
                let i = rng.random_range(0..n);
                s.push(scores[i]);
                l.push(labels[i]);
            }
            compute(&s, &l)
        })
        .collect();
    let mut out = BTreeMap::new();
    let pick: [(&str, MetricOf); 6] = [
        ("auc", |m| m.auc),
        ("logloss", |m| Some(m.logloss)),
        ("brier", |m| Some(m.brier)),
        ("ece", |m| Some(m.ece)),
        ("accuracy", |m| Some(m.accuracy)),
        ("positive_rate", |m| Some(m.positive_rate)),
    ];
    for (name, get) in pick {
        let mut values: Vec<f64> = samples.iter().filter_map(get).collect();
        if values.len() < 2 {
            continue;
        }
        values.sort_by(f64::total_cmp);
        out.insert(
            name.to_string(),
            [percentile(&values, 0.025), percentile(&values, 0.975)],
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ece_of_no_rows_is_positive_zero() {
        assert!(ece(&[], &[]).is_sign_positive());
    }

    #[test]
    fn hand_computed_case() {
        let scores = [0.1, 0.4, 0.35, 0.8];
        let labels = [false, false, true, true];
        let m = compute(&scores, &labels);
        assert_eq!(m.auc, Some(0.75));
        let ll = -((0.9f64).ln() + (0.6f64).ln() + (0.35f64).ln() + (0.8f64).ln()) / 4.0;
        assert!((m.logloss - ll).abs() < 1e-12);
        let brier = (0.01 + 0.16 + 0.4225 + 0.04) / 4.0;
        assert!((m.brier - brier).abs() < 1e-12);
        assert_eq!(m.accuracy, 0.75);
        assert_eq!(m.positive_rate, 0.25);
        assert_eq!(m.label_rate, 0.5);
        // Bins: 0.1 -> 1 (y 0), 0.35 -> 3 (y 1), 0.4 -> 4 (y 0), 0.8 -> 8 (y 1).
        let ece = (0.1 + 0.65 + 0.4 + 0.2) / 4.0;
        assert!((m.ece - ece).abs() < 1e-12);
    }

    #[test]
    fn one_class_gives_null_auc_with_a_reason() {
        let m = compute(&[0.2, 0.3], &[true, true]);
        assert_eq!(m.auc, None);
        assert!(m.auc_note.unwrap().contains("both classes"));
    }

    #[test]
    fn bootstrap_brackets_the_estimate_and_repeats() {
        let scores: Vec<f64> = (0..500).map(|i| (i % 100) as f64 / 100.0).collect();
        let labels: Vec<bool> = (0..500).map(|i| (i * 7919) % 100 < i % 100).collect();
        let a = bootstrap(&scores, &labels, 200, 3);
        let b = bootstrap(&scores, &labels, 200, 3);
        assert_eq!(a, b);
        let auc = compute(&scores, &labels).auc.unwrap();
        assert!(a["auc"][0] < auc && auc < a["auc"][1]);
    }
}
