//! predict: score a snapshot with a model (see the library for the tool).

fn main() -> std::process::ExitCode {
    predict::main()
}
