//! `register` with the fault the tests inject: `RUNFN_TEST_PAUSE_AFTER_BLOBS=PATH` makes a
//! registration, once its blobs are stored and before its index transaction, create PATH and
//! sleep a minute, so a test can SIGKILL it at exactly that moment. Built only with the
//! `fault-injection` feature, which only the tests' build enables (`make test`); `register`
//! never reads the variable.

fn main() -> std::process::ExitCode {
    register::main(std::env::var_os("RUNFN_TEST_PAUSE_AFTER_BLOBS").map(Into::into))
}
