//! A polite stop: the first SIGTERM or SIGINT (what Kubernetes, Slurm and spot instances send
//! before they kill) is only remembered, so that a long-running tool can finish what it is doing,
//! save its state and exit with [`crate::Exit::Preempted`]. Repeats are ignored: a launcher that
//! forwards the signal to processes that already got it from the scheduler (Slurm signals every
//! process of a step; a terminal signals the whole foreground group) must not turn the request
//! into a kill. The scheduler's SIGKILL after its grace period stays the hard stop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

/// The last signal caught (0: none). signal-hook's handler stores the signal's number here,
/// which is all a handler may safely do.
static REQUESTED: LazyLock<Arc<AtomicUsize>> = LazyLock::new(|| Arc::new(AtomicUsize::new(0)));

/// Catches SIGTERM and SIGINT from now on.
pub fn install() {
    install_for(&[libc::SIGTERM, libc::SIGINT]);
}

/// Catches `signals` from now on: each is remembered (see [`requested`], [`take`]), never acted
/// on by the default action.
pub fn install_for(signals: &[i32]) {
    for &signal in signals {
        // A signal that cannot be caught (SIGKILL) is a programming error, not a runtime one.
        signal_hook::flag::register_usize(signal, Arc::clone(&REQUESTED), signal as usize)
            .expect("a signal that can be caught");
    }
}

/// The signal that asked this process to stop, if one did.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal as i32),
    }
}

/// The signal caught since the last `take`, if any, forgetting it (a launcher forwards each
/// signal it gets once).
pub fn take() -> Option<i32> {
    match REQUESTED.swap(0, Ordering::SeqCst) {
        0 => None,
        signal => Some(signal as i32),
    }
}

/// The signal's usual name, for messages.
pub fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_signal_is_remembered_and_a_repeat_does_not_kill() {
        install();
        assert_eq!(requested(), None);
        // SAFETY: raising a signal this process handles.
        unsafe { libc::raise(libc::SIGINT) };
        assert_eq!(requested(), Some(libc::SIGINT));
        // SAFETY: as above; a second SIGINT with the default action would end the test run.
        unsafe { libc::raise(libc::SIGINT) };
        assert_eq!(requested(), Some(libc::SIGINT));
        assert_eq!(name(libc::SIGINT), "SIGINT");
    }
}
