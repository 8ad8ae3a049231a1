//! The stall watchdog: a thread that watches the step counter and, when it stays put for
//! `stall_timeout_s`, makes the run end as a failed check (exit 1 with its record), never as a
//! crash.
//!
//! The training loop is asked first: it polls [`Watchdog::poll`] at every step and, when a stall
//! was flagged, stops and returns its report like any failed check. Only a loop that does not
//! come back within a grace period (stuck in a read, a collective or libtorch) is ended from the
//! watchdog thread by the [`StallHandler`], which writes the record and leaves with `_exit`. A
//! small state machine decides which of the two writes the record, so exactly one does.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Called from the watchdog thread, with the reason, when the loop did not stop by itself. It
/// must end the process (the loop is stuck): see `runfn_core::exit::exit_from_thread`.
pub type StallHandler = Box<dyn FnOnce(String) + Send>;

const RUNNING: u8 = 0;
const FLAGGED: u8 = 1;
const LOOP_STOPS: u8 = 2;
const WATCHDOG_ENDS: u8 = 3;
const FINISHED: u8 = 4;

#[derive(Debug)]
struct Shared {
    steps: AtomicU64,
    state: AtomicU8,
    reason: Mutex<Option<String>>,
}

#[derive(Debug)]
pub struct Watchdog {
    shared: Arc<Shared>,
}

/// How long the loop gets to notice a flagged stall before the watchdog ends the process.
fn grace(timeout: Duration) -> Duration {
    timeout.clamp(Duration::from_secs(1), Duration::from_secs(30))
}

impl Watchdog {
    pub fn start(timeout: Duration, on_stall: StallHandler) -> Watchdog {
        let shared = Arc::new(Shared {
            steps: AtomicU64::new(0),
            state: AtomicU8::new(RUNNING),
            reason: Mutex::new(None),
        });
        let watched = Arc::clone(&shared);
        std::thread::spawn(move || watch(&watched, timeout, on_stall));
        Watchdog { shared }
    }

    /// The loop finished a step.
    pub fn stepped(&self, step: u64) {
        self.shared.steps.store(step, Ordering::Relaxed);
    }

    /// `Some(reason)` when a stall was flagged: the loop must stop now and report it. If the
    /// watchdog already took over, this never returns: the process is being ended.
    pub fn poll(&self) -> Option<String> {
        match self.shared.state.compare_exchange(
            FLAGGED,
            LOOP_STOPS,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => self.shared.reason.lock().map(|r| r.clone()).ok().flatten(),
            Err(WATCHDOG_ENDS) => park_forever(),
            Err(_) => None,
        }
    }

    /// The loop is over: no stall is reported from now on. Never returns if the watchdog
    /// already took over.
    pub fn finish(&self) {
        if self.shared.state.swap(FINISHED, Ordering::SeqCst) == WATCHDOG_ENDS {
            self.shared.state.store(WATCHDOG_ENDS, Ordering::SeqCst);
            park_forever();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // An early return (an error) also ends the watch; a take-over already in progress wins.
        let _ = self.shared.state.compare_exchange(
            RUNNING,
            FINISHED,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        let _ = self.shared.state.compare_exchange(
            FLAGGED,
            FINISHED,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}

/// The watchdog is writing the record and ending the process; this thread only waits.
fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

fn watch(shared: &Shared, timeout: Duration, on_stall: StallHandler) {
    let tick = Duration::from_millis(200).min(timeout);
    let mut last = shared.steps.load(Ordering::Relaxed);
    let mut since = Instant::now();
    loop {
        std::thread::sleep(tick);
        if shared.state.load(Ordering::SeqCst) != RUNNING {
            return;
        }
        let now = shared.steps.load(Ordering::Relaxed);
        if now != last {
            last = now;
            since = Instant::now();
            continue;
        }
        if since.elapsed() < timeout {
            continue;
        }
        let reason = format!(
            "stalled: the step counter stayed at {now} for {:.0} s (limit manifest.config.stall_timeout_s = {:.0} s)",
            since.elapsed().as_secs_f64(),
            timeout.as_secs_f64()
        );
        if let Ok(mut slot) = shared.reason.lock() {
            *slot = Some(reason.clone());
        }
        if shared
            .state
            .compare_exchange(RUNNING, FLAGGED, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return;
        }
        let flagged = Instant::now();
        while flagged.elapsed() < grace(timeout) {
            std::thread::sleep(tick.min(Duration::from_millis(20)));
            if shared.state.load(Ordering::SeqCst) != FLAGGED {
                return;
            }
        }
        if shared
            .state
            .compare_exchange(FLAGGED, WATCHDOG_ENDS, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            on_stall(reason);
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_loop_that_polls_stops_itself_and_the_handler_is_not_called() {
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(
            Duration::from_millis(10),
            Box::new(move |r| tx.send(r).unwrap()),
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        let reason = loop {
            if let Some(r) = dog.poll() {
                break r;
            }
            assert!(Instant::now() < deadline, "no stall flagged");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(
            reason.starts_with("stalled: the step counter stayed at 0"),
            "{reason}"
        );
        dog.finish();
        assert!(
            rx.recv_timeout(grace(Duration::from_millis(10)) * 2)
                .is_err()
        );
    }

    #[test]
    fn a_loop_that_never_polls_is_ended_by_the_handler() {
        let (tx, rx) = mpsc::channel();
        let _dog = Watchdog::start(
            Duration::from_millis(10),
            Box::new(move |r| tx.send(r).unwrap()),
        );
        let reason = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("handler called");
        assert!(reason.starts_with("stalled"), "{reason}");
    }

    #[test]
    fn steps_keep_it_quiet_and_finish_ends_the_watch() {
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(
            Duration::from_millis(100),
            Box::new(move |r| tx.send(r).unwrap()),
        );
        for step in 1..=20 {
            std::thread::sleep(Duration::from_millis(10));
            dog.stepped(step);
            assert_eq!(dog.poll(), None);
        }
        dog.finish();
        assert!(rx.recv_timeout(Duration::from_millis(1500)).is_err());
    }
}
