//! Live alerts: conditions worth a look that do not stop the run (a throughput drop, a loss
//! spike, a checkpoint grown old, an input-bound loop). Each kind is raised once per episode: it
//! fires when its condition starts to hold and is armed again only once the condition has
//! cleared, so a slow stretch of a hundred windows is one alert, not a hundred.
//!
//! Detection is pure arithmetic over what the loop measured; it never touches the model, the
//! optimizer or a random stream, so a run with alerts trains the same weights as one without.

use std::collections::VecDeque;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use runfn_stats::percentile::median;

/// The environment variable naming a command (run through `sh -c`) to call on every alert.
pub const COMMAND_ENV: &str = "RUNFN_LIVE_ALERT_CMD";
/// How long an alert command may run before it is killed: a hung pager must not pile up.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The kinds of live alert, and one alert as metrics.jsonl, `train.alerts` and the command's
/// stdin carry it.
pub use runfn_schema::record::{AlertKind, TrainAlert as Alert};

/// The slot of `kind` in the per-kind state.
fn slot(kind: AlertKind) -> usize {
    kind as usize
}

pub use runfn_schema::train::AlertConfig;

/// Watches the loop's measurements and returns the alerts that start an episode.
#[derive(Debug)]
pub struct Detector {
    config: AlertConfig,
    checkpoint_age_s: Option<f64>,
    windows_seen: u64,
    /// The log windows pooled so far: samples, seconds, seconds waiting for data.
    pool: (u64, f64, f64),
    rates: Vec<f64>,
    losses: VecDeque<f64>,
    active: [bool; 4],
}

impl Detector {
    /// `checkpoint_age_s` is the resolved limit (the configured one or the derived default).
    pub fn new(config: AlertConfig, checkpoint_age_s: Option<f64>) -> Detector {
        Detector {
            config,
            checkpoint_age_s,
            windows_seen: 0,
            pool: (0, 0.0, 0.0),
            rates: Vec::new(),
            losses: VecDeque::new(),
            active: [false; 4],
        }
    }

    /// True when `kind` starts an episode now (firing and not already in one).
    fn episode(&mut self, kind: AlertKind, firing: bool) -> bool {
        let was = std::mem::replace(&mut self.active[slot(kind)], firing);
        firing && !was
    }

    /// After every step: the loss spike and the checkpoint age.
    pub fn step(&mut self, step: u64, loss: f64, since_checkpoint_s: f64) -> Vec<Alert> {
        let mut alerts = Vec::new();
        if let Some(sigmas) = self.config.loss_spike_sigmas {
            let window = self.config.loss_window.max(2) as usize;
            if self.losses.len() == window {
                let n = window as f64;
                let mean = self.losses.iter().sum::<f64>() / n;
                let var = self.losses.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n;
                let std = var.sqrt();
                let limit = mean + sigmas * std;
                let firing = loss > limit && loss > mean;
                if self.episode(AlertKind::LossSpike, firing) {
                    let deviations = if std > 0.0 {
                        format!("{:.1}", (loss - mean) / std)
                    } else {
                        "infinitely many".into()
                    };
                    alerts.push(Alert {
                        kind: AlertKind::LossSpike,
                        step,
                        value: loss,
                        threshold: limit,
                        message: format!(
                            "loss {loss:.4} at step {step} is {deviations} deviations above the mean {mean:.4} \
                             of the last {window} steps (limit {sigmas})"
                        ),
                    });
                }
                self.losses.pop_front();
            }
            self.losses.push_back(loss);
        }
        if let Some(limit) = self.checkpoint_age_s {
            let firing = since_checkpoint_s > limit;
            if self.episode(AlertKind::CheckpointAge, firing) {
                alerts.push(Alert {
                    kind: AlertKind::CheckpointAge,
                    step,
                    value: since_checkpoint_s,
                    threshold: limit,
                    message: format!(
                        "{since_checkpoint_s:.2} s since the last checkpoint at step {step}, above the limit of \
                         {limit} s: a failure now loses that much work"
                    ),
                });
            }
        }
        alerts
    }

    /// A checkpoint was written: the checkpoint-age episode ends.
    pub fn checkpointed(&mut self) {
        self.active[slot(AlertKind::CheckpointAge)] = false;
    }

    /// After every log window ending at `step` (`samples` in `seconds` of step time, of which
    /// `wait_s` waiting for data): the throughput drop and the input-bound check, once the pooled
    /// windows cover `min_window_s`.
    pub fn window(&mut self, step: u64, samples: u64, seconds: f64, wait_s: f64) -> Vec<Alert> {
        let mut alerts = Vec::new();
        self.pool = (
            self.pool.0 + samples,
            self.pool.1 + seconds,
            self.pool.2 + wait_s,
        );
        let (samples, seconds, wait_s) = self.pool;
        if seconds < self.config.min_window_s || seconds <= 0.0 {
            return alerts;
        }
        self.pool = (0, 0.0, 0.0);
        let samples_per_s = samples as f64 / seconds;
        let data_wait_fraction = wait_s / seconds;
        self.windows_seen += 1;
        if self.windows_seen <= self.config.warmup_windows {
            return alerts;
        }
        if let Some(fraction) = self.config.throughput_fraction {
            if self.rates.len() as u64 >= self.config.warmup_windows.max(1) {
                let median = median(&self.rates);
                let limit = fraction * median;
                let firing = samples_per_s < limit;
                if self.episode(AlertKind::ThroughputDrop, firing) {
                    alerts.push(Alert {
                        kind: AlertKind::ThroughputDrop,
                        step,
                        value: samples_per_s,
                        threshold: limit,
                        message: format!(
                            "{samples_per_s:.0} samples/s over the window ending at step {step}, below {fraction} \
                             of the run's median {median:.0} samples/s"
                        ),
                    });
                }
            }
            self.rates.push(samples_per_s);
        }
        if let Some(limit) = self.config.data_wait_fraction {
            let firing = data_wait_fraction > limit;
            if self.episode(AlertKind::InputBound, firing) {
                alerts.push(Alert {
                    kind: AlertKind::InputBound,
                    step,
                    value: data_wait_fraction,
                    threshold: limit,
                    message: format!(
                        "the loop waited for data {:.0}% of the window ending at step {step}, above {:.0}%: \
                         the input pipeline is the bottleneck",
                        100.0 * data_wait_fraction,
                        100.0 * limit
                    ),
                });
            }
        }
        alerts
    }
}

/// Runs the alert command (`RUNFN_LIVE_ALERT_CMD`) for each alert, in the background: the loop only
/// pays for the spawn. A command that fails, hangs (killed after 30 s) or cannot start never
/// fails the run; its failures are collected for one warning each.
#[derive(Debug)]
pub struct Notifier {
    command: Option<String>,
    pending: Vec<JoinHandle<()>>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Notifier {
    pub fn from_env() -> Notifier {
        Notifier::new(
            std::env::var(COMMAND_ENV)
                .ok()
                .filter(|c| !c.trim().is_empty()),
        )
    }

    pub fn new(command: Option<String>) -> Notifier {
        Notifier {
            command,
            pending: Vec::new(),
            failures: Arc::default(),
        }
    }

    /// Starts the command for `alert` with `summary` in `RUNFN_ALERT_SUMMARY`.
    pub fn notify(&mut self, alert: &Alert, summary: &str) {
        let Some(command) = &self.command else {
            return;
        };
        let spawned = Command::new("sh")
            .args(["-c", command])
            .env("RUNFN_ALERT_KIND", alert.kind.name())
            .env("RUNFN_ALERT_SUMMARY", summary)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                self.fail(format!("{COMMAND_ENV}: could not start `{command}`: {e}"));
                return;
            }
        };
        let mut body = serde_json::to_string(alert).expect("an alert serializes");
        body.push('\n');
        let failures = Arc::clone(&self.failures);
        let command = command.clone();
        self.pending.push(std::thread::spawn(move || {
            // A command that does not read its stdin closes the pipe; that is its business.
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(body.as_bytes());
            }
            let started = Instant::now();
            let outcome = loop {
                match child.try_wait() {
                    Ok(Some(status)) if status.success() => break None,
                    Ok(Some(status)) => break Some(format!("ended with {status}")),
                    Ok(None) if started.elapsed() > COMMAND_TIMEOUT => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break Some(format!(
                            "ran over {} s and was killed",
                            COMMAND_TIMEOUT.as_secs()
                        ));
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                    Err(e) => break Some(e.to_string()),
                }
            };
            if let Some(why) = outcome {
                failures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!("{COMMAND_ENV}: `{command}` {why}"));
            }
        }));
    }

    fn fail(&self, message: String) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(message);
    }

    /// Waits up to `limit` for the commands still running (so that a short command finishes
    /// before the process exits) and returns the failures to warn about.
    pub fn finish(self, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        while self.pending.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        for handle in self.pending.into_iter().filter(|h| h.is_finished()) {
            let _ = handle.join();
        }
        std::mem::take(&mut *self.failures.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unpooled windows, judged one by one.
    fn detector(checkpoint_age_s: Option<f64>) -> Detector {
        let config = AlertConfig {
            min_window_s: 0.0,
            ..AlertConfig::default()
        };
        Detector::new(config, checkpoint_age_s)
    }

    /// A one-second window at `rate` samples/s that waited `wait` of its time.
    fn second(d: &mut Detector, step: u64, rate: f64, wait: f64) -> Vec<Alert> {
        d.window(step, rate as u64, 1.0, wait)
    }

    fn kinds(alerts: &[Alert]) -> Vec<AlertKind> {
        alerts.iter().map(|a| a.kind).collect()
    }

    /// A steady loss with a little deterministic noise around `level`.
    fn noisy(i: u64, level: f64) -> f64 {
        level + 0.01 * (((i * 7919) % 13) as f64 / 13.0 - 0.5)
    }

    #[test]
    fn steady_series_raise_nothing() {
        let mut d = detector(Some(100.0));
        for i in 1..=2000 {
            // A slowly falling loss, as in training.
            let loss = noisy(i, 0.7 - 0.2 * i as f64 / 2000.0);
            assert!(d.step(i, loss, (i % 50) as f64).is_empty(), "step {i}");
            if i % 25 == 0 {
                let rate = 50_000.0 + 5_000.0 * ((i / 25) % 3) as f64;
                assert!(second(&mut d, i, rate, 0.05).is_empty(), "window at {i}");
            }
        }
    }

    #[test]
    fn a_loss_spike_alerts_once_per_episode() {
        let mut d = detector(None);
        let mut raised = Vec::new();
        for i in 1..=300 {
            let spike = (150..153).contains(&i) || i == 250;
            let loss = if spike { 2.0 } else { noisy(i, 0.5) };
            raised.extend(d.step(i, loss, 0.0));
        }
        assert_eq!(kinds(&raised), [AlertKind::LossSpike, AlertKind::LossSpike]);
        assert_eq!(raised[0].step, 150, "three spiking steps are one episode");
        assert_eq!(raised[0].value, 2.0);
        assert!(raised[0].threshold > 0.5 && raised[0].threshold < 0.6);
        assert_eq!(raised[1].step, 250, "a later spike is a new episode");
        assert!(raised[0].message.contains("deviations above the mean"));
    }

    #[test]
    fn a_throughput_drop_alerts_after_the_warm_up() {
        let mut d = detector(None);
        let mut raised = Vec::new();
        // Slow start-up windows count for nothing; then steady, a drop, steady, a second drop.
        for w in 1..=40u64 {
            let rate = match w {
                1..=3 => 1_000.0,
                20..=24 | 35 => 20_000.0,
                _ => 50_000.0,
            };
            raised.extend(second(&mut d, w * 25, rate, 0.1));
        }
        assert_eq!(
            kinds(&raised),
            [AlertKind::ThroughputDrop, AlertKind::ThroughputDrop]
        );
        assert_eq!((raised[0].step, raised[1].step), (500, 875));
        assert_eq!(raised[0].value, 20_000.0);
        assert_eq!(raised[0].threshold, 25_000.0);
    }

    #[test]
    fn input_bound_windows_alert_once_until_they_clear() {
        let mut d = detector(None);
        let mut raised = Vec::new();
        for w in 1..=20u64 {
            let wait = if (10..15).contains(&w) || w == 2 {
                0.8
            } else {
                0.1
            };
            raised.extend(second(&mut d, w * 10, 1000.0, wait));
        }
        assert_eq!(
            kinds(&raised),
            [AlertKind::InputBound],
            "window 2 is warm-up"
        );
        assert_eq!(raised[0].step, 100);
        assert_eq!((raised[0].value, raised[0].threshold), (0.8, 0.5));
    }

    #[test]
    fn checkpoint_age_alerts_until_a_checkpoint_and_can_be_off() {
        let mut d = detector(Some(10.0));
        let mut raised = Vec::new();
        for i in 1..=30u64 {
            raised.extend(d.step(i, 0.5, i as f64));
        }
        d.checkpointed();
        raised.extend(d.step(31, 0.5, 11.0));
        assert_eq!(
            kinds(&raised),
            [AlertKind::CheckpointAge, AlertKind::CheckpointAge]
        );
        assert_eq!((raised[0].step, raised[0].value), (11, 11.0));
        assert_eq!(raised[1].step, 31);
        let mut off = Detector::new(AlertConfig::default(), None);
        assert!(off.step(1, 0.5, 1e9).is_empty());
    }

    #[test]
    fn short_windows_are_pooled_until_they_cover_the_minimum() {
        let mut d = Detector::new(AlertConfig::default(), None);
        let mut raised = Vec::new();
        // 10 ms windows: a single slow one (a scheduler hiccup) is lost in its second, a slow
        // second is not.
        for w in 1..=2000u64 {
            let (samples, wait) = match w {
                500 => (100, 0.009),
                1500..=1600 => (200, 0.009),
                _ => (1000, 0.001),
            };
            raised.extend(d.window(w * 10, samples, 0.01, wait));
        }
        assert_eq!(
            kinds(&raised),
            [AlertKind::ThroughputDrop, AlertKind::InputBound]
        );
        // Sums of 0.01 s land a window either side of a whole second.
        assert!(
            (15_000..=16_020).contains(&raised[0].step),
            "the first second of slow windows: {raised:?}"
        );
        assert!(raised[0].value < 25_000.0, "{raised:?}");
        assert!(raised[1].value > 0.85, "{raised:?}");
    }

    #[test]
    fn a_kind_set_to_none_is_off() {
        let config = AlertConfig {
            min_window_s: 0.0,
            throughput_fraction: None,
            data_wait_fraction: None,
            loss_spike_sigmas: None,
            ..AlertConfig::default()
        };
        let mut d = Detector::new(config, None);
        for w in 1..=20u64 {
            let rate = if w > 10 { 1.0 } else { 1000.0 };
            assert!(second(&mut d, w, rate, 0.99).is_empty());
        }
        for i in 1..=100 {
            assert!(d.step(i, if i == 80 { 100.0 } else { 0.5 }, 0.0).is_empty());
        }
    }

    #[test]
    fn the_command_gets_the_alert_on_stdin_and_its_failure_is_only_reported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("got.json");
        let alert = Alert {
            kind: AlertKind::LossSpike,
            step: 7,
            value: 2.0,
            threshold: 1.0,
            message: "m".into(),
        };
        let mut n = Notifier::new(Some(format!(
            "cat > '{}'; echo \"$RUNFN_ALERT_KIND|$RUNFN_ALERT_SUMMARY\" >> '{}'",
            file.display(),
            file.display()
        )));
        n.notify(&alert, "the summary");
        assert!(n.finish(Duration::from_secs(10)).is_empty());
        let got = std::fs::read_to_string(&file).unwrap();
        let mut lines = got.lines();
        let json: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(json["kind"], "loss_spike");
        assert_eq!(json["step"], 7);
        assert_eq!(lines.next(), Some("loss_spike|the summary"));

        let mut failing = Notifier::new(Some("exit 3".into()));
        failing.notify(&alert, "s");
        let failures = failing.finish(Duration::from_secs(10));
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("exit status: 3"), "{failures:?}");
    }
}
