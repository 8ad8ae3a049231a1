//! The one exit-code table of runfn.

use std::process::ExitCode;

/// How a tool ended. Every runfn tool exits with one of these and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the work is done and every check passed.
    Passed,
    /// 1: a check failed; the record, with the reasons, still went to stdout.
    CheckFailed,
    /// 2: bad usage or bad input; nothing went to stdout and no partial file was left behind.
    BadInput,
    /// 3: stopped on request (SIGTERM or SIGINT, as a scheduler sends before it kills) after
    /// finishing the step in progress and writing a checkpoint; the same command resumes there.
    /// Only `train` ends this way. It is not a failed check: a scheduler can requeue on it.
    Preempted,
    /// 4: the environment failed (a store unreachable or timing out, a full disk, memory
    /// exhausted, a failed rendezvous, a crash): the input was not judged wrong, and the same
    /// command may pass when retried. Nothing went to stdout. See [`crate::retryable`].
    EnvironmentFailed,
}

impl Exit {
    pub const fn code(self) -> u8 {
        match self {
            Exit::Passed => 0,
            Exit::CheckFailed => 1,
            Exit::BadInput => 2,
            Exit::Preempted => 3,
            Exit::EnvironmentFailed => 4,
        }
    }

    /// `Passed` when `passed`, else `CheckFailed`.
    pub const fn from_passed(passed: bool) -> Exit {
        if passed {
            Exit::Passed
        } else {
            Exit::CheckFailed
        }
    }

    /// Combines two outcomes: the worse one wins (bad input over a failed environment over a
    /// failed check over a pass; a preemption, which says nothing about the checks, only over a
    /// pass).
    pub fn and(self, other: Exit) -> Exit {
        let rank = |e: Exit| match e {
            Exit::Passed => 0,
            Exit::Preempted => 1,
            Exit::CheckFailed => 2,
            Exit::EnvironmentFailed => 3,
            Exit::BadInput => 4,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// Ends the process from a thread that is not main, when main cannot return (it is stuck in a
/// read or a collective). `std::process::exit` would run libc's exit handlers and C++ static
/// destructors (libtorch's among them) while main and libtorch's worker threads still use them,
/// which crashes the process (SIGSEGV) instead of exiting; `_exit` ends it at once. Standard
/// streams are flushed first, so what was written reaches the pipe.
pub fn exit_from_thread(exit: Exit) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().lock().flush();
    let _ = std::io::stderr().lock().flush();
    // SAFETY: `_exit` is async-signal-safe and touches no state of this process.
    unsafe { libc::_exit(exit.code().into()) }
}

/// The line every tool's `--help` ends its exit codes with (added by [`crate::cli::command`],
/// written once here): what exit 4 means is the same for every tool.
pub const ENVIRONMENT_FAILED_HELP: &str = "4 the environment failed (a store unreachable or timing \
out, a full disk, out of memory on the CPU\nor a GPU, a failed rendezvous, a crash): the same \
command may pass when retried.";

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_table() {
        assert_eq!(Exit::Passed.code(), 0);
        assert_eq!(Exit::CheckFailed.code(), 1);
        assert_eq!(Exit::BadInput.code(), 2);
        assert_eq!(Exit::Preempted.code(), 3);
        assert_eq!(Exit::EnvironmentFailed.code(), 4);
    }

    #[test]
    fn from_passed_maps_booleans() {
        assert_eq!(Exit::from_passed(true), Exit::Passed);
        assert_eq!(Exit::from_passed(false), Exit::CheckFailed);
    }

    #[test]
    fn and_keeps_the_worse_outcome() {
        assert_eq!(Exit::Passed.and(Exit::CheckFailed), Exit::CheckFailed);
        assert_eq!(Exit::BadInput.and(Exit::Passed), Exit::BadInput);
        assert_eq!(Exit::CheckFailed.and(Exit::BadInput), Exit::BadInput);
        assert_eq!(Exit::Preempted.and(Exit::CheckFailed), Exit::CheckFailed);
        assert_eq!(Exit::Passed.and(Exit::Preempted), Exit::Preempted);
        assert_eq!(
            Exit::CheckFailed.and(Exit::EnvironmentFailed),
            Exit::EnvironmentFailed
        );
        assert_eq!(Exit::EnvironmentFailed.and(Exit::BadInput), Exit::BadInput);
    }
}
