//! train: train the run's model on libtorch; resumable, exactly (see the library for the tool).

fn main() -> std::process::ExitCode {
    train::main(Default::default())
}
