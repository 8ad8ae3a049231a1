//! Failures of the environment rather than of the input: a store that cannot be reached or
//! times out, a full disk, memory exhausted, a rendezvous that failed, a crash. They end a tool
//! with exit 4, which tells a cron wrapper that the same command may pass later; exit 2 stays
//! "your input is wrong". They are told apart by the error's type (an [`std::io::Error`]'s kind
//! or OS code, or an [`EnvironmentFailed`] that a crate attached where it knows the cause),
//! never by the text of a message.

use std::error::Error;

/// What in the environment failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// An object store or another server could not be reached, or the connection broke.
    Unreachable,
    /// A server, a peer or a device did not answer in time.
    TimedOut,
    /// No space left on a device, or a quota exceeded.
    DiskFull,
    /// Memory could not be allocated.
    OutOfMemory,
    /// The device reported an I/O error, or a network file handle went stale.
    DeviceError,
    /// The ranks of a distributed job could not form their process group.
    Rendezvous,
    /// The tool crashed (a panic): a defect, or a machine in a bad state.
    Crash,
}

impl Cause {
    pub const fn words(self) -> &'static str {
        match self {
            Cause::Unreachable => "a server cannot be reached",
            Cause::TimedOut => "timed out",
            Cause::DiskFull => "no space left on the device",
            Cause::OutOfMemory => "out of memory",
            Cause::DeviceError => "an I/O error of the device",
            Cause::Rendezvous => "the rendezvous failed",
            Cause::Crash => "the tool crashed",
        }
    }
}

/// Marks an error as the environment's: attached as the source (or context) of the error
/// that says what was being done.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the environment failed ({}); the same command may pass when retried (exit 4)", cause.words())]
pub struct EnvironmentFailed {
    pub cause: Cause,
}

impl EnvironmentFailed {
    pub const fn new(cause: Cause) -> EnvironmentFailed {
        EnvironmentFailed { cause }
    }
}

/// The environment's failure behind `err`, if any cause in its chain is one.
pub fn cause_of(err: &anyhow::Error) -> Option<Cause> {
    err.chain().find_map(cause_of_error)
}

/// `error` itself, as an environment failure (not its sources).
pub fn cause_of_error(error: &(dyn Error + 'static)) -> Option<Cause> {
    if let Some(marked) = error.downcast_ref::<EnvironmentFailed>() {
        return Some(marked.cause);
    }
    let io = error.downcast_ref::<std::io::Error>()?;
    io_cause(io).or_else(|| {
        // An error a writer wrapped into an io::Error (a CSV or compression writer's, kind
        // Other): the OS error is in its own chain.
        let mut inner: Option<&(dyn Error + 'static)> =
            io.get_ref().map(|e| e as &(dyn Error + 'static));
        while let Some(error) = inner {
            if let Some(cause) = cause_of_error(error) {
                return Some(cause);
            }
            inner = error.source();
        }
        None
    })
}

/// The environment's failure behind `error` or any of its sources, if one is.
pub fn cause_in_chain(error: &(dyn Error + 'static)) -> Option<Cause> {
    std::iter::successors(Some(error), |&e| e.source()).find_map(cause_of_error)
}

/// Whether an OS error is the environment's. A missing file, a denied permission or bad data
/// are the input's; a closed pipe is the reader's choice.
pub fn io_cause(error: &std::io::Error) -> Option<Cause> {
    use std::io::ErrorKind as K;
    match error.kind() {
        K::StorageFull | K::QuotaExceeded => return Some(Cause::DiskFull),
        K::OutOfMemory => return Some(Cause::OutOfMemory),
        K::TimedOut => return Some(Cause::TimedOut),
        K::ConnectionRefused
        | K::ConnectionReset
        | K::ConnectionAborted
        | K::NotConnected
        | K::HostUnreachable
        | K::NetworkUnreachable
        | K::NetworkDown
        | K::AddrNotAvailable => return Some(Cause::Unreachable),
        K::StaleNetworkFileHandle => return Some(Cause::DeviceError),
        _ => {}
    }
    match error.raw_os_error() {
        Some(libc::EIO) => Some(Cause::DeviceError),
        Some(libc::ENOSPC | libc::EDQUOT) => Some(Cause::DiskFull),
        Some(libc::ENOMEM) => Some(Cause::OutOfMemory),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::InputError;
    use std::io::{Error as IoError, ErrorKind};

    #[test]
    fn os_errors_of_the_environment_are_told_by_kind_and_code() {
        let full = IoError::from_raw_os_error(libc::ENOSPC);
        assert_eq!(io_cause(&full), Some(Cause::DiskFull));
        let refused = IoError::from(ErrorKind::ConnectionRefused);
        assert_eq!(io_cause(&refused), Some(Cause::Unreachable));
        assert_eq!(
            io_cause(&IoError::from_raw_os_error(libc::EIO)),
            Some(Cause::DeviceError)
        );
        for input in [
            ErrorKind::NotFound,
            ErrorKind::PermissionDenied,
            ErrorKind::InvalidData,
            ErrorKind::BrokenPipe,
        ] {
            assert_eq!(io_cause(&IoError::from(input)), None, "{input:?}");
        }
    }

    /// A CSV writer turns a full disk into `io::Error::other(csv::Error)`: kind Other, no OS
    /// code. The disk is still full.
    #[test]
    fn an_os_error_wrapped_into_another_io_error_is_found() {
        #[derive(Debug)]
        struct Wrapper(IoError);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "writing a record: {}", self.0)
            }
        }
        impl Error for Wrapper {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let wrapped = IoError::other(Wrapper(IoError::from_raw_os_error(libc::ENOSPC)));
        assert_eq!(wrapped.kind(), ErrorKind::Other);
        assert_eq!(cause_of_error(&wrapped), Some(Cause::DiskFull));
        let plain = IoError::other(Wrapper(IoError::from(ErrorKind::InvalidData)));
        assert_eq!(cause_of_error(&plain), None);
    }

    #[test]
    fn a_cause_deep_in_the_chain_is_found() {
        let io = IoError::from_raw_os_error(libc::ENOSPC);
        let err = anyhow::Error::new(InputError::Io {
            path: "out.json".into(),
            source: io,
        })
        .context("writing the profile");
        assert_eq!(cause_of(&err), Some(Cause::DiskFull));
        let marked = anyhow::Error::new(EnvironmentFailed::new(Cause::Rendezvous))
            .context("rank 1 of 2: cannot join");
        assert_eq!(cause_of(&marked), Some(Cause::Rendezvous));
        let input = anyhow::Error::new(InputError::field("data.label", "missing"));
        assert_eq!(cause_of(&input), None);
    }

    #[test]
    fn the_same_words_in_a_message_do_not_count() {
        // Classification is by type: a message that happens to say "timed out" is input.
        let err = anyhow::anyhow!("config.note: connection refused, timed out, disk full");
        assert_eq!(cause_of(&err), None);
    }
}
