//! A polite stop: the first SIGTERM or SIGINT (what Kubernetes, Slurm and spot instances send
//! before they kill) is only remembered, so that a long-running tool can finish what it is doing,
//! save its state and exit with [`crate::Exit::Preempted`]. Repeats are ignored: a launcher that
//! forwards the signal to processes that already got it from the scheduler (Slurm signals every
//! process of a step; a terminal signals the whole foreground group) must not turn the request
//! into a kill. The scheduler's SIGKILL after its grace period stays the hard stop.

use std::sync::atomic::{AtomicI32, Ordering};

static REQUESTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn remember(signal: libc::c_int) {
    REQUESTED.store(signal, Ordering::SeqCst);
}

/// Catches the first SIGTERM and SIGINT from now on.
pub fn install() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = remember as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The signal that asked this process to stop, if one did.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
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
