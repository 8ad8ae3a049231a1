//! A seeded paired bootstrap of the difference in a metric between two models scored on the same
//! rows.
//!
//! Each resample draws the rows with replacement and scores both models on the same draw, so the
//! rows' shared difficulty cancels: what is left is the noise of the difference itself. Resample
//! `k` has its own generator seeded from (seed, k), so the result does not depend on how many
//! threads ran it. The metrics are the ones `evaluate` reports, defined the same way: log loss
//! with probabilities clipped to [1e-15, 1 − 1e-15], Brier score, accuracy and positive rate at
//! 0.5, mean score, and ECE over 10 equal-width bins (a score of exactly 1 in the last).

use rayon::prelude::*;

use crate::mix::{SplitMix64, finalize};

const CLIP: f64 = 1e-15;
const THRESHOLD: f64 = 0.5;
const ECE_BINS: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowMetric {
    Logloss,
    Brier,
    Accuracy,
    PositiveRate,
    MeanScore,
    Ece,
}

impl RowMetric {
    pub fn parse(name: &str) -> Option<RowMetric> {
        Some(match name {
            "logloss" => RowMetric::Logloss,
            "brier" => RowMetric::Brier,
            "accuracy" => RowMetric::Accuracy,
            "positive_rate" => RowMetric::PositiveRate,
            "mean_score" => RowMetric::MeanScore,
            "ece" => RowMetric::Ece,
            _ => return None,
        })
    }

    /// The metric's value on one row, for those that are a mean over rows.
    fn row_value(self, p: f64, y: bool) -> f64 {
        let target = if y { 1.0 } else { 0.0 };
        match self {
            RowMetric::Logloss => {
                let q = p.clamp(CLIP, 1.0 - CLIP);
                -(target * q.ln() + (1.0 - target) * (1.0 - q).ln())
            }
            RowMetric::Brier => (p - target) * (p - target),
            RowMetric::Accuracy => f64::from(u8::from((p >= THRESHOLD) == y)),
            RowMetric::PositiveRate => f64::from(u8::from(p >= THRESHOLD)),
            RowMetric::MeanScore => p,
            RowMetric::Ece => unreachable!("ECE is not a mean over rows"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedBootstrap {
    /// The metric of the first scores (the candidate) on all the rows.
    pub a: f64,
    /// The metric of the second scores (the baseline).
    pub b: f64,
    /// The standard deviation of `a − b` over the resamples.
    pub se: f64,
    pub resamples: usize,
}

impl PairedBootstrap {
    pub fn delta(&self) -> f64 {
        self.a - self.b
    }
}

/// The paired bootstrap of `metric` over `rows` (indices into `a`, `b` and `labels`; the
/// resamples draw from these rows only, so a slice is resampled within itself). `rows` must not
/// be empty, and the scores must not be NaN.
pub fn paired_bootstrap(
    metric: RowMetric,
    a: &[f64],
    b: &[f64],
    labels: &[bool],
    rows: &[u32],
    resamples: usize,
    seed: u64,
) -> PairedBootstrap {
    assert!(!rows.is_empty(), "a bootstrap needs rows");
    let resample_seed = |k: usize| finalize(seed ^ finalize(k as u64 + 1));
    let draw = |rng: &mut SplitMix64| rows[index(rng, rows.len())] as usize;
    let deltas: Vec<f64>;
    let (value_a, value_b);
    if metric == RowMetric::Ece {
        let rows_all: Vec<usize> = rows.iter().map(|&r| r as usize).collect();
        value_a = ece_of(a, labels, rows_all.iter().copied());
        value_b = ece_of(b, labels, rows_all.iter().copied());
        deltas = (0..resamples)
            .into_par_iter()
            .map(|k| {
                let mut rng = SplitMix64::new(resample_seed(k));
                let mut bins_a = Bins::default();
                let mut bins_b = Bins::default();
                for _ in 0..rows.len() {
                    let i = draw(&mut rng);
                    bins_a.add(a[i], labels[i]);
                    bins_b.add(b[i], labels[i]);
                }
                bins_a.ece() - bins_b.ece()
            })
            .collect();
    } else {
        let diffs: Vec<f64> = rows
            .iter()
            .map(|&r| {
                let i = r as usize;
                metric.row_value(a[i], labels[i]) - metric.row_value(b[i], labels[i])
            })
            .collect();
        let n = rows.len() as f64;
        value_a = rows
            .iter()
            .map(|&r| metric.row_value(a[r as usize], labels[r as usize]))
            .sum::<f64>()
            / n;
        value_b = rows
            .iter()
            .map(|&r| metric.row_value(b[r as usize], labels[r as usize]))
            .sum::<f64>()
            / n;
        deltas = (0..resamples)
            .into_par_iter()
            .map(|k| {
                let mut rng = SplitMix64::new(resample_seed(k));
                let mut sum = 0.0;
                for _ in 0..diffs.len() {
                    sum += diffs[index(&mut rng, diffs.len())];
                }
                sum / n
            })
            .collect();
    }
    PairedBootstrap {
        a: value_a,
        b: value_b,
        se: standard_deviation(&deltas),
        resamples,
    }
}

/// A uniform index below `n` by Lemire's multiply-shift on 32 random bits: no division, and a
/// bias of at most n / 2^32 (under 0.03% for a million rows), far below a bootstrap's own noise.
fn index(rng: &mut SplitMix64, n: usize) -> usize {
    (((rng.next_u64() >> 32) * n as u64) >> 32) as usize
}

#[derive(Default)]
struct Bins {
    score: [f64; ECE_BINS],
    label: [f64; ECE_BINS],
    count: [u32; ECE_BINS],
}

impl Bins {
    fn add(&mut self, p: f64, y: bool) {
        let bin = ((p * ECE_BINS as f64) as usize).min(ECE_BINS - 1);
        self.score[bin] += p;
        self.label[bin] += f64::from(u8::from(y));
        self.count[bin] += 1;
    }

    fn ece(&self) -> f64 {
        let total: u32 = self.count.iter().sum();
        (0..ECE_BINS)
            .filter(|&k| self.count[k] > 0)
            .map(|k| (self.score[k] - self.label[k]).abs())
            .sum::<f64>()
            / f64::from(total.max(1))
            // A float sum starts at -0.0: no rows would print `"ece": -0.0`.
            + 0.0
    }
}

fn ece_of(scores: &[f64], labels: &[bool], rows: impl Iterator<Item = usize>) -> f64 {
    let mut bins = Bins::default();
    for i in rows {
        bins.add(scores[i], labels[i]);
    }
    bins.ece()
}

fn standard_deviation(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize) -> Vec<u32> {
        (0..n as u32).collect()
    }

    fn data(n: usize) -> (Vec<f64>, Vec<f64>, Vec<bool>) {
        let mut rng = SplitMix64::new(3);
        let labels: Vec<bool> = (0..n).map(|_| rng.next_f64() < 0.3).collect();
        let a: Vec<f64> = labels
            .iter()
            .map(|&y| (rng.next_f64() * 0.6 + if y { 0.35 } else { 0.0 }).min(1.0))
            .collect();
        let b: Vec<f64> = a
            .iter()
            .map(|p| (p + (rng.next_f64() - 0.5) * 0.2).clamp(0.0, 1.0))
            .collect();
        (a, b, labels)
    }

    #[test]
    fn reproducible_and_independent_of_threads() {
        let (a, b, y) = data(2000);
        let one = paired_bootstrap(RowMetric::Logloss, &a, &b, &y, &rows(2000), 300, 7);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let single =
            pool.install(|| paired_bootstrap(RowMetric::Logloss, &a, &b, &y, &rows(2000), 300, 7));
        assert_eq!(one, single);
        let other = paired_bootstrap(RowMetric::Logloss, &a, &b, &y, &rows(2000), 300, 8);
        assert_ne!(one.se, other.se);
    }

    /// For a mean over rows the bootstrap's spread is the standard error of the mean of the
    /// per-row differences (with divisor n), up to the bootstrap's own noise (~1/√(2B)).
    #[test]
    fn a_mean_matches_the_standard_error_of_the_differences() {
        let (a, b, y) = data(5000);
        for metric in [RowMetric::Logloss, RowMetric::Brier, RowMetric::Accuracy] {
            let boot = paired_bootstrap(metric, &a, &b, &y, &rows(5000), 2000, 1);
            let d: Vec<f64> = (0..5000)
                .map(|i| metric.row_value(a[i], y[i]) - metric.row_value(b[i], y[i]))
                .collect();
            let mean = d.iter().sum::<f64>() / 5000.0;
            let se = (d.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 5000.0).sqrt()
                / 5000f64.sqrt();
            assert!((boot.delta() - mean).abs() < 1e-12);
            assert!(
                (boot.se / se - 1.0).abs() < 0.06,
                "{metric:?}: {} vs {se}",
                boot.se
            );
        }
    }

    #[test]
    fn ece_uses_ten_bins_and_a_slice_resamples_within_itself() {
        let a = [0.05, 0.15, 1.0, 0.95];
        let y = [false, false, true, true];
        let boot = paired_bootstrap(RowMetric::Ece, &a, &a, &y, &[0, 1, 2, 3], 50, 1);
        let expected = (0.05 + 0.15 + 0.0 + 0.05) / 4.0;
        assert!((boot.a - expected).abs() < 1e-12, "{boot:?}");
        assert_eq!(boot.se, 0.0, "the same scores never differ");
        let slice = paired_bootstrap(RowMetric::MeanScore, &a, &[0.0; 4], &y, &[2, 3], 50, 1);
        assert!((slice.a - 0.975).abs() < 1e-12);
        assert!(slice.se > 0.0 && slice.se < 0.05);
    }
}
