//! `train` with the faults the tests inject, read from `RUNFN_TEST_*` variables. Built only with
//! the `fault-injection` feature, which only the tests' build enables (`make test`); the `train`
//! binary never reads these variables, so a stray one cannot change a real run.
//!
//!   RUNFN_TEST_HANG_AT_STEP=N                the loop stops making progress for good at step N
//!   RUNFN_TEST_SLOW_INPUT_MS_FROM_STEP=S:MS  from step S on, every batch arrives MS ms late
//!   RUNFN_TEST_LOSS_SPIKE_AT_STEP=N          step N trains on its batch's labels flipped
//!   RUNFN_TEST_SLOW_CKPT_WRITE_MS=MS         every background checkpoint write starts MS ms late
//!   RUNFN_TEST_PANIC_AT_STEP=N               the loop panics at step N
//!   RUNFN_TEST_PIECE_ROWS=N                  shards are read in pieces of at most N rows (not a
//!                                            fault: the tests' small shards cut as large ones are)

use std::time::Duration;

use runfn_learn::trainer::Faults;

fn main() -> std::process::ExitCode {
    train::main(faults_from_env())
}

fn faults_from_env() -> Faults {
    let var = |name: &str| std::env::var(name).ok();
    Faults {
        hang_at: var("RUNFN_TEST_HANG_AT_STEP").and_then(|v| v.parse().ok()),
        slow_input: var("RUNFN_TEST_SLOW_INPUT_MS_FROM_STEP").and_then(|v| {
            let (step, ms) = v.split_once(':')?;
            Some((step.parse().ok()?, Duration::from_millis(ms.parse().ok()?)))
        }),
        flip_labels_at: var("RUNFN_TEST_LOSS_SPIKE_AT_STEP").and_then(|v| v.parse().ok()),
        slow_ckpt_write: var("RUNFN_TEST_SLOW_CKPT_WRITE_MS")
            .and_then(|v| v.parse().ok())
            .map_or(Duration::ZERO, Duration::from_millis),
        panic_at: var("RUNFN_TEST_PANIC_AT_STEP").and_then(|v| v.parse().ok()),
        piece_rows: var("RUNFN_TEST_PIECE_ROWS").and_then(|v| v.parse().ok()),
    }
}
