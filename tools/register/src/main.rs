//! register: store an approved model with its lineage (see the library for the tool).

fn main() -> std::process::ExitCode {
    register::main(None)
}
