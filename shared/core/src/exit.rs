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
}

impl Exit {
    pub const fn code(self) -> u8 {
        match self {
            Exit::Passed => 0,
            Exit::CheckFailed => 1,
            Exit::BadInput => 2,
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

    /// Combines two outcomes: the worse one wins.
    pub fn and(self, other: Exit) -> Exit {
        if other.code() > self.code() {
            other
        } else {
            self
        }
    }
}

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
    }
}
