//! evaluate: score a model on the frozen test split (see the library for the tool).

fn main() -> std::process::ExitCode {
    evaluate::main()
}
