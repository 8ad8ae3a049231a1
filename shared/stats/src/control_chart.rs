//! A control chart for a drift distance: how unusual tonight's value is against the same
//! distance measured between earlier windows of the data and their own references.
//!
//! The history holds h values d₁…d_h of one check on one column (window k against its
//! reference, for the h windows before tonight's). Taking them as draws of the distance's
//! distribution when nothing is wrong (seasons, a column's usual wander and sampling noise
//! included), tonight's value d is judged by a prediction interval: with mean d̄ and standard
//! deviation s, (d − d̄)/(s·√(1 + 1/h)) is Student-t with h − 1 degrees of freedom, so its
//! upper tail is the one-sided p-value. Few windows give few degrees of freedom and a wide
//! interval: the chart asks for more evidence the less history it has.
//!
//! Distances are skewed (they are sizes of differences, like the length of a noisy vector): a
//! rainy week after a dry one makes a spike that a normal fit of the raw values calls
//! impossible. So the chart fits the history twice, as it is and on the square-root scale
//! (which makes a chi-like distance nearly symmetric), and takes the larger p-value: tonight's
//! value is extreme only if it is so under both, as a unit change or an outage is. (A log
//! scale was tried and rejected: on a history of mostly zeros with a few spikes it made even
//! a column wholly out of its range look ordinary.)

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Window pairs a chart needs before it judges anything: with fewer, its interval says little.
pub const MIN_HISTORY: usize = 4;

/// A check's history, fitted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chart {
    pub windows: usize,
    pub mean: f64,
    pub sd: f64,
    /// The same fit of √d.
    root: Fit,
}

/// Mean and standard deviation of h values.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fit {
    windows: usize,
    mean: f64,
    sd: f64,
}

impl Fit {
    fn of(values: &[f64]) -> Fit {
        let h = values.len();
        let mean = values.iter().sum::<f64>() / h as f64;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (h - 1) as f64;
        Fit {
            windows: h,
            mean,
            sd: variance.sqrt(),
        }
    }

    fn p_value(&self, value: f64) -> f64 {
        let h = self.windows as f64;
        let scale = self.sd * (1.0 + 1.0 / h).sqrt();
        // A history that never moved: anything above it is beyond it (rounding aside).
        let tiny = 1e-12 * self.mean.abs().max(1.0);
        if scale <= tiny || !scale.is_finite() {
            return if value > self.mean + tiny { 0.0 } else { 1.0 };
        }
        let t = (value - self.mean) / scale;
        StudentsT::new(0.0, 1.0, h - 1.0).map_or(1.0, |dist| dist.sf(t))
    }

    fn limit(&self, alpha: f64) -> f64 {
        let h = self.windows as f64;
        let t = StudentsT::new(0.0, 1.0, h - 1.0)
            .map_or(f64::INFINITY, |dist| dist.inverse_cdf(1.0 - alpha));
        self.mean + t * self.sd * (1.0 + 1.0 / h).sqrt()
    }
}

impl Chart {
    /// `None` under [`MIN_HISTORY`] values, or when one is negative or not finite.
    pub fn fit(history: &[f64]) -> Option<Chart> {
        if history.len() < MIN_HISTORY || history.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return None;
        }
        let raw = Fit::of(history);
        let roots: Vec<f64> = history.iter().map(|v| v.sqrt()).collect();
        Some(Chart {
            windows: raw.windows,
            mean: raw.mean,
            sd: raw.sd,
            root: Fit::of(&roots),
        })
    }

    fn raw(&self) -> Fit {
        Fit {
            windows: self.windows,
            mean: self.mean,
            sd: self.sd,
        }
    }

    /// The one-sided p-value of `value`: the chance a window as ordinary as the history's
    /// reaches it, the larger of the two fits'.
    pub fn p_value(&self, value: f64) -> f64 {
        let root = self.root.p_value(value.max(0.0).sqrt());
        self.raw().p_value(value).max(root)
    }

    /// The value whose p-value is `alpha`: what the chart lets pass at that level.
    pub fn limit(&self, alpha: f64) -> f64 {
        let root = self.root.limit(alpha).max(0.0);
        self.raw().limit(alpha).max(root * root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_like_the_history_passes_and_one_far_beyond_it_does_not() {
        let chart = Chart::fit(&[0.10, 0.14, 0.08, 0.12, 0.11, 0.13]).unwrap();
        assert!(chart.p_value(0.12) > 0.3);
        assert!(chart.p_value(0.60) < 1e-4, "{}", chart.p_value(0.60));
        let limit = chart.limit(0.001);
        assert!(
            (chart.p_value(limit) - 0.001).abs() < 1e-6,
            "{}",
            chart.p_value(limit)
        );
        assert!(limit > 0.14 && limit < 0.60, "{limit}");
    }

    #[test]
    fn short_or_broken_history_fits_nothing() {
        assert!(Chart::fit(&[0.1, 0.2, 0.3]).is_none());
        assert!(Chart::fit(&[0.1, 0.2, f64::NAN, 0.3, 0.2]).is_none());
        let flat = Chart::fit(&[0.0; 5]).unwrap();
        assert_eq!(flat.p_value(0.0), 1.0);
        assert_eq!(flat.p_value(0.01), 0.0);
    }

    /// Fewer windows, wider interval: the same excess is less evidence.
    #[test]
    fn less_history_asks_for_more() {
        let short = Chart::fit(&[0.1, 0.2, 0.1, 0.2]).unwrap();
        let long = Chart::fit(&[0.1, 0.2].repeat(10)).unwrap();
        assert!(short.p_value(0.5) > long.p_value(0.5));
    }

    /// A skewed history (mostly small, now and then a rainy week): a normal fit of the raw
    /// values calls the next large spike impossible, the square-root fit does not, and the
    /// chart takes the larger p-value. A value far beyond even the spikes is extreme under both.
    #[test]
    fn a_skewed_history_makes_its_next_spike_ordinary_but_not_a_jump_beyond_it() {
        let mut history = vec![0.02; 30];
        history.extend([0.3, 0.5, 0.25, 0.4]);
        let chart = Chart::fit(&history).unwrap();
        let normal_only = chart.raw().p_value(0.6);
        assert!(normal_only < 1e-4, "{normal_only}");
        assert!(chart.p_value(0.6) > 1e-4, "{}", chart.p_value(0.6));
        assert!(chart.p_value(20.0) < 1e-5, "{}", chart.p_value(20.0));
    }
}
