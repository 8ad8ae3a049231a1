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
    let n = scores.len() as f64;
    let (auc, auc_note) = match runfn_stats::auc::auc(scores, labels) {
        Ok(auc) => (Some(auc), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let mut logloss = 0.0;
    let mut brier = 0.0;
    let mut correct = 0usize;
    let mut predicted = 0usize;
    let mut positives = 0usize;
    for (&p, &y) in scores.iter().zip(labels) {
        let y = if y { 1.0 } else { 0.0 };
        let q = p.clamp(CLIP, 1.0 - CLIP);
        logloss -= y * q.ln() + (1.0 - y) * (1.0 - q).ln();
        brier += (p - y) * (p - y);
        let call = p >= THRESHOLD;
        predicted += call as usize;
        positives += (y == 1.0) as usize;
        correct += (call == (y == 1.0)) as usize;
    }
    Metrics {
        auc,
        auc_note,
        logloss: logloss / n,
        brier: brier / n,
        ece: ece(scores, labels),
        accuracy: correct as f64 / n,
        positive_rate: predicted as f64 / n,
        label_rate: positives as f64 / n,
        mean_score: scores.iter().sum::<f64>() / n,
        rows: scores.len() as u64,
        ci95: None,
    }
}

/// Expected calibration error: the row-weighted mean over 10 equal-width score bins of
/// |mean score - label rate|. A score of exactly 1 falls in the last bin.
pub fn ece(scores: &[f64], labels: &[bool]) -> f64 {
    let mut sum_p = [0.0; ECE_BINS];
    let mut sum_y = [0.0; ECE_BINS];
    let mut count = [0usize; ECE_BINS];
    for (&p, &y) in scores.iter().zip(labels) {
        let bin = ((p * ECE_BINS as f64) as usize).min(ECE_BINS - 1);
        sum_p[bin] += p;
        sum_y[bin] += if y { 1.0 } else { 0.0 };
        count[bin] += 1;
    }
    let n = scores.len() as f64;
    // A float sum starts at -0.0: no rows would print `"ece": -0.0`.
    0.0 + (0..ECE_BINS)
        .filter(|&b| count[b] > 0)
        .map(|b| (sum_p[b] - sum_y[b]).abs() / n)
        .sum::<f64>()
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
