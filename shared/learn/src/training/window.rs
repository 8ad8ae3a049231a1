//! The log window: averages over the steps since the last metrics line.

use std::time::Duration;

use serde_json::{Value, json};

#[derive(Debug, Default)]
pub(crate) struct Window {
    steps: u64,
    loss: f64,
    pub(crate) wait: Duration,
    pub(crate) compute: Duration,
    allreduce: Duration,
    pub(crate) samples: u64,
}

/// What a closed window tells the alert detector: samples, seconds, seconds waiting for data.
pub(crate) type Closed = (u64, f64, f64);

impl Window {
    pub(crate) fn add(
        &mut self,
        loss: f64,
        wait: Duration,
        compute: Duration,
        allreduce: Duration,
        samples: u64,
    ) {
        self.steps += 1;
        self.loss += loss;
        self.wait += wait;
        self.compute += compute;
        self.allreduce += allreduce;
        self.samples += samples;
    }

    /// The metrics line of the window ending at `step`.
    pub(crate) fn line(&self, step: u64, epoch: u64, lr: f64, grad_norm: f64) -> Value {
        let total = (self.wait + self.compute).as_secs_f64();
        let n = self.steps.max(1) as f64;
        let mut line = json!({
            "step": step,
            "epoch": epoch,
            "loss": self.loss / n,
            "lr": lr,
            "grad_norm": grad_norm,
            "step_time_s": total / n,
            "data_wait_fraction": if total > 0.0 { self.wait.as_secs_f64() / total } else { 0.0 },
            "samples_per_s": if total > 0.0 { self.samples as f64 / total } else { 0.0 },
        });
        if !self.allreduce.is_zero() && total > 0.0 {
            line["allreduce_fraction"] = json!(self.allreduce.as_secs_f64() / total);
        }
        line
    }

    /// Closes the window: its line and what the alert detector needs, and a new empty window.
    pub(crate) fn close(
        &mut self,
        step: u64,
        epoch: u64,
        lr: f64,
        grad_norm: f64,
    ) -> (Value, Closed) {
        let line = self.line(step, epoch, lr, grad_norm);
        let closed = (
            self.samples,
            (self.wait + self.compute).as_secs_f64(),
            self.wait.as_secs_f64(),
        );
        *self = Window::default();
        (line, closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_averages_its_steps_and_closing_starts_a_new_one() {
        let mut window = Window::default();
        let ms = Duration::from_millis;
        window.add(1.0, ms(100), ms(300), Duration::ZERO, 64);
        window.add(3.0, ms(100), ms(500), Duration::ZERO, 64);
        let (line, (samples, seconds, wait)) = window.close(20, 1, 0.01, 0.5);
        assert_eq!(line["step"], 20);
        assert_eq!(line["loss"], 2.0);
        assert!((line["step_time_s"].as_f64().unwrap() - 0.5).abs() < 1e-9);
        assert!((line["data_wait_fraction"].as_f64().unwrap() - 0.2).abs() < 1e-9);
        assert!((line["samples_per_s"].as_f64().unwrap() - 128.0).abs() < 1e-9);
        assert!(
            line.get("allreduce_fraction").is_none(),
            "one rank: no all-reduce"
        );
        assert_eq!(samples, 128);
        assert!((seconds - 1.0).abs() < 1e-9 && (wait - 0.2).abs() < 1e-9);
        assert_eq!(window.steps, 0, "closing starts a new window");
        window.add(1.0, ms(0), ms(100), ms(50), 8);
        let (line, _) = window.close(21, 1, 0.01, 0.5);
        assert!((line["allreduce_fraction"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    }
}
