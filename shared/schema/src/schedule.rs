//! The learning-rate schedule: linear warmup, then cosine decay to `min_lr_ratio * lr`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub lr: f64,
    pub warmup_steps: u64,
    pub total_steps: u64,
    pub min_lr_ratio: f64,
}

impl Schedule {
    /// The learning rate of step `step` (0-based).
    pub fn lr_at(&self, step: u64) -> f64 {
        if step < self.warmup_steps {
            return self.lr * (step + 1) as f64 / self.warmup_steps as f64;
        }
        let decay_steps = self.total_steps.saturating_sub(self.warmup_steps).max(1);
        let progress = ((step - self.warmup_steps) as f64 / decay_steps as f64).min(1.0);
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        self.lr * (self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_then_decays_to_the_floor() {
        let s = Schedule {
            lr: 1.0,
            warmup_steps: 10,
            total_steps: 110,
            min_lr_ratio: 0.1,
        };
        assert!((s.lr_at(0) - 0.1).abs() < 1e-12);
        assert!((s.lr_at(9) - 1.0).abs() < 1e-12);
        assert!((s.lr_at(10) - 1.0).abs() < 1e-12);
        assert!((s.lr_at(60) - 0.55).abs() < 1e-12);
        assert!((s.lr_at(110) - 0.1).abs() < 1e-12);
        assert!((s.lr_at(500) - 0.1).abs() < 1e-12);
        for step in 10..110 {
            assert!(s.lr_at(step + 1) <= s.lr_at(step));
        }
    }
}
