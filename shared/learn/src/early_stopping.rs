//! Early stopping on the val AUC: the best evaluation so far and how many evaluations in a row
//! have not beaten it. The run stops once that count reaches the patience, and the model it
//! writes is the best evaluation's (its checkpoint is kept for that).

use crate::checkpoint::Best;

/// The best val AUC so far and the evaluations since it, carried in every checkpoint so that a
/// resumed run stops at the same step as an uninterrupted one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValWatch {
    pub best: Option<Best>,
    /// Evaluations since the best one that did not beat it.
    pub since_best: u64,
    /// Evaluations without a higher val AUC that end the run (0: never).
    pub patience: u64,
}

impl ValWatch {
    /// One val evaluation at `step`; true when it is a new best. Only a strictly higher AUC is
    /// one, so a plateau counts towards the patience. An undefined AUC (one class in val) neither
    /// improves nor counts: with no AUC there is nothing to stop on.
    pub fn observe(&mut self, step: u64, auc: Option<f64>) -> bool {
        match auc {
            Some(auc) if self.best.is_none_or(|b| auc > b.val_auc) => {
                self.best = Some(Best { step, val_auc: auc });
                self.since_best = 0;
                true
            }
            Some(_) => {
                self.since_best += 1;
                false
            }
            None => false,
        }
    }

    /// `patience` evaluations in a row scored no higher than the best.
    pub fn exhausted(&self) -> bool {
        self.patience > 0 && self.since_best >= self.patience
    }
}

/// The record's `train.early_stopping`.
pub use runfn_schema::record::TrainEarlyStopping as EarlyStoppingReport;

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(patience: u64) -> ValWatch {
        ValWatch {
            best: None,
            since_best: 0,
            patience,
        }
    }

    #[test]
    fn stops_after_patience_evaluations_without_a_higher_auc() {
        let mut w = watch(2);
        assert!(w.observe(10, Some(0.6)));
        assert!(!w.observe(20, Some(0.6)), "a tie is no improvement");
        assert!(!w.exhausted());
        assert!(w.observe(30, Some(0.7)));
        assert_eq!(w.since_best, 0, "a new best resets the count");
        assert!(!w.observe(40, Some(0.65)));
        assert!(!w.exhausted());
        assert!(!w.observe(50, Some(0.69)));
        assert!(w.exhausted());
        assert_eq!(
            w.best,
            Some(Best {
                step: 30,
                val_auc: 0.7
            })
        );
    }

    #[test]
    fn an_undefined_auc_neither_improves_nor_counts() {
        let mut w = watch(1);
        assert!(!w.observe(10, None));
        assert!(!w.observe(20, None));
        assert!(!w.exhausted());
        assert_eq!(w.best, None);
        assert!(w.observe(30, Some(0.5)));
        assert!(!w.observe(40, None));
        assert!(!w.exhausted());
    }

    #[test]
    fn patience_zero_never_stops() {
        let mut w = watch(0);
        w.observe(10, Some(0.9));
        for step in 2..100 {
            w.observe(step * 10, Some(0.1));
        }
        assert!(!w.exhausted());
        assert_eq!(w.since_best, 98);
    }
}
