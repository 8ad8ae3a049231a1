//! libtorch's failures told apart: memory it could not allocate (on the CPU or a GPU) and a
//! failed CUDA or NCCL call are the environment's (exit 4, a retry on another machine or later
//! may pass); anything else it reports is a defect or bad input. libtorch hands its errors
//! over as text only (`tch::TchError::Torch(String)`, or the same text in a panic of `tch`'s
//! infallible wrappers), so the text of c10's own messages is all there is to read; the
//! patterns are c10's allocator and CUDA/NCCL check macros, which have kept their wording
//! across releases.

use runfn_core::retryable::{Cause, EnvironmentFailed};

/// A libtorch call that failed: its message without the C++ stack, and the environment's cause
/// when it is one (carried as the error's source, so the exit code follows from the type).
#[derive(Debug, thiserror::Error)]
#[error("libtorch: {message}")]
pub struct TorchFailure {
    pub message: String,
    #[source]
    pub cause: Option<EnvironmentFailed>,
}

impl From<tch::TchError> for TorchFailure {
    fn from(err: tch::TchError) -> TorchFailure {
        let text = err.to_string();
        match cause_of_message(&text) {
            Some((cause, message)) => TorchFailure {
                message,
                cause: Some(EnvironmentFailed::new(cause)),
            },
            None => TorchFailure {
                message: without_stack(&text),
                cause: None,
            },
        }
    }
}

/// `err` as a [`TorchFailure`], for `map_err` at a fallible libtorch call.
pub fn torch(err: tch::TchError) -> TorchFailure {
    TorchFailure::from(err)
}

/// The environment's cause in a libtorch message (an error's or a panic's), with the message
/// cut to what a person needs: the allocation that failed, not c10's stack frames.
pub fn cause_of_message(text: &str) -> Option<(Cause, String)> {
    let message = without_stack(text);
    let cause = if message.contains("can't allocate memory")
        || message.contains("not enough memory")
        || message.contains("CUDA out of memory")
        || message.contains("OutOfMemoryError")
    {
        Cause::OutOfMemory
    } else if message.contains("CUDA error") || message.contains("NCCL error") {
        Cause::DeviceError
    } else {
        return None;
    };
    Some((cause, message))
}

/// c10's message up to its stack trace ("frame #0: …", "Exception raised from …"), on one line,
/// without the `[enforce fail at file:line] err == 0.` prefix a user cannot act on.
fn without_stack(text: &str) -> String {
    let mut cut = text;
    for marker in [
        "frame #0",
        "Exception raised from",
        "\\nframe #",
        "\nframe #",
    ] {
        if let Some(at) = cut.find(marker) {
            cut = &cut[..at];
        }
    }
    // A panic of `tch`'s wrappers says `called Result::unwrap() on an Err value: Torch("…`.
    if let Some(at) = cut.find("Torch(\"") {
        cut = &cut[at + "Torch(\"".len()..];
    }
    let cut = cut.strip_prefix("Internal torch error: ").unwrap_or(cut);
    let mut message = cut.replace("\\n", " ");
    if let Some(at) = message.find("DefaultCPUAllocator:") {
        message = message[at..].to_string();
    }
    let message: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let message = message.trim_end();
    // A panic's text is the error's Debug form: `Torch("…")`.
    message
        .strip_suffix("\")")
        .unwrap_or(message)
        .trim_end_matches('"')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The texts are what libtorch 2.x prints: c10's CPU allocator, CUDA's caching allocator
    // and the NCCL check macro.
    const CPU: &str = "Torch(\"[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: \
        can't allocate memory: you tried to allocate 269484548 bytes. Error code 12 (Cannot \
        allocate memory)\\nframe #0: c10::ThrowEnforceNotMet(char const*, int) + 0x6a\")";
    const GPU: &str = "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total \
        capacity; 78.50 GiB already allocated)\nException raised from malloc at \
        CUDACachingAllocator.cpp:913";
    const NCCL: &str = "NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL \
        version 2.21.5";

    #[test]
    fn memory_and_device_failures_are_the_environments_and_lose_their_stack() {
        let (cause, message) = cause_of_message(CPU).unwrap();
        assert_eq!(cause, Cause::OutOfMemory);
        assert_eq!(
            message,
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 269484548 \
             bytes. Error code 12 (Cannot allocate memory)"
        );
        let (cause, message) = cause_of_message(GPU).unwrap();
        assert_eq!(cause, Cause::OutOfMemory);
        assert!(!message.contains("Exception raised"), "{message}");
        assert_eq!(cause_of_message(NCCL).unwrap().0, Cause::DeviceError);
    }

    #[test]
    fn a_panic_of_the_wrappers_reads_as_its_error_does() {
        let panic = format!("called `Result::unwrap()` on an `Err` value: {CPU}");
        let (cause, message) = cause_of_message(&panic).unwrap();
        assert_eq!(cause, Cause::OutOfMemory);
        assert!(message.starts_with("DefaultCPUAllocator: "), "{message}");
        assert!(message.ends_with("(Cannot allocate memory)"), "{message}");
        let gpu = format!("called `Result::unwrap()` on an `Err` value: Torch({GPU:?})");
        let (_, message) = cause_of_message(&gpu).unwrap();
        assert!(message.starts_with("CUDA out of memory."), "{message}");
        assert!(message.ends_with("already allocated)"), "{message}");
    }

    #[test]
    fn a_shape_error_is_not_the_environments() {
        let shape = "shape '[4, 3]' is invalid for input of size 10\nException raised from \
            infer_size_impl at InferSize.h:95";
        assert_eq!(cause_of_message(shape), None);
        let failure = TorchFailure::from(tch::TchError::Torch(shape.to_string()));
        assert!(failure.cause.is_none());
        assert_eq!(
            failure.to_string(),
            "libtorch: shape '[4, 3]' is invalid for input of size 10"
        );
    }

    #[test]
    fn an_allocation_failure_carries_exit_4_in_its_chain() {
        let failure = TorchFailure::from(tch::TchError::Torch(CPU.to_string()));
        let err = anyhow::Error::new(failure).context("training step 3");
        assert_eq!(
            runfn_core::retryable::cause_of(&err),
            Some(Cause::OutOfMemory)
        );
    }
}
