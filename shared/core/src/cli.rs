//! The edge of every tool: flags shared by all, messages on stderr, the record on stdout, and the
//! one place where an error becomes `tool: message` and exit 2.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use crate::exit::Exit;
use crate::record::Record;
use crate::timings::Stopwatch;

/// Flags every tool takes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommonArgs {
    /// Print nothing on stderr but errors and failed checks.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Indent the JSON on stdout (default: one line).
    #[arg(long, global = true)]
    pub pretty: bool,
}

/// A running tool: its name, its stopwatch and how it talks.
#[derive(Debug)]
pub struct Tool {
    name: &'static str,
    stopwatch: Stopwatch,
    common: CommonArgs,
}

impl Tool {
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// A progress message on stderr, unless `-q`.
    pub fn info(&self, message: impl std::fmt::Display) {
        if !self.common.quiet {
            eprintln!("{}: {message}", self.name);
        }
    }

    /// A warning on stderr, unless `-q`.
    pub fn warn(&self, message: impl std::fmt::Display) {
        if !self.common.quiet {
            eprintln!("{}: warning: {message}", self.name);
        }
    }

    /// Why the run is failing or losing data (a failed check, rows left out of every split), on
    /// stderr even under `-q`: like an error, it is the message a person must see, and a
    /// pipeline run quietly keeps it in its log and its alert.
    pub fn notice(&self, message: impl std::fmt::Display) {
        eprintln!("{}: {message}", self.name);
    }

    /// A progress bar over `len` units, drawn only when stderr is a terminal and not `-q`.
    pub fn progress_bar(&self, len: u64, unit_template: &str) -> ProgressBar {
        if self.common.quiet || !std::io::stderr().is_terminal() {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        let template = format!("{}: {{bar:40}} {unit_template} ({{eta}})", self.name);
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style);
        }
        bar
    }

    /// Appends this tool's `timings` entry, writes the record to stdout and returns `exit`.
    /// A reader that stops reading (a closed pipe) is not an error.
    pub fn finish(&self, record: Record, exit: Exit) -> anyhow::Result<Exit> {
        self.finish_with(record, exit, serde_json::Map::new())
    }

    /// `finish`, with `environment` added to the entry's environment (what only this tool knows:
    /// train's threads, libtorch and device).
    pub fn finish_with(
        &self,
        record: Record,
        exit: Exit,
        environment: serde_json::Map<String, serde_json::Value>,
    ) -> anyhow::Result<Exit> {
        self.finish_entry(
            record,
            exit,
            self.stopwatch.entry_with(self.name, environment),
        )
    }

    /// `finish`, with the entry saying the memory budget the tool ran within
    /// (`memory_budget_bytes`; its peak is the entry's `max_rss_bytes`).
    pub fn finish_within(&self, record: Record, exit: Exit, budget: u64) -> anyhow::Result<Exit> {
        let mut entry = self.stopwatch.entry(self.name);
        entry["memory_budget_bytes"] = serde_json::Value::from(budget);
        self.finish_entry(record, exit, entry)
    }

    /// `finish`, with the entry marked `"for": role`: work done for a comparison rather than
    /// for the run itself (evaluate scoring the baseline), which report maps as its own stage.
    pub fn finish_for(&self, record: Record, exit: Exit, role: &str) -> anyhow::Result<Exit> {
        let mut entry = self.stopwatch.entry(self.name);
        entry["for"] = serde_json::Value::from(role);
        self.finish_entry(record, exit, entry)
    }

    /// `finish_for` and `finish_within` together.
    pub fn finish_for_within(
        &self,
        record: Record,
        exit: Exit,
        role: &str,
        budget: u64,
    ) -> anyhow::Result<Exit> {
        let mut entry = self.stopwatch.entry(self.name);
        entry["for"] = serde_json::Value::from(role);
        entry["memory_budget_bytes"] = serde_json::Value::from(budget);
        self.finish_entry(record, exit, entry)
    }

    fn finish_entry(
        &self,
        mut record: Record,
        exit: Exit,
        entry: serde_json::Value,
    ) -> anyhow::Result<Exit> {
        record.push_timing(entry)?;
        let stdout = std::io::stdout();
        match record.write_to(&mut stdout.lock(), self.common.pretty) {
            Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(anyhow::Error::new(err).context("writing the record to stdout"))
            }
            _ => Ok(exit),
        }
    }
}

/// Writes `bytes` to stdout and flushes it. A reader that went away (`tool | head -c1`) is no
/// error: the tool stops writing quietly, as Unix tools do, instead of reporting a crash.
pub fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// What `-h` prints under the flags; `--help` prints the tool's examples, output section and exit
/// codes instead, and the man page keeps them too.
const SHORT_AFTER_HELP: &str =
    "Examples, the output section and the exit codes: --help (or man TOOL).";

/// Parses the command line into `A`. `--help` and `--version` print to stdout and exit 0; a usage
/// error is one line `tool: message` on stderr and exit 2, like every other bad input, instead
/// of clap's several lines that start with `error:`. `--generate KIND` as the first argument
/// prints the man page or a completion script (see [`crate::generate`]). `version` is what
/// `--version` prints after the name (the package version and the commit, from runfn-version,
/// which only the binaries depend on so that a commit does not rebuild the libraries).
pub fn parse_args<A: clap::Parser>(name: &str, version: &'static str) -> A {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    if let Some(request) = crate::generate::requested(&args) {
        let kind = request.unwrap_or_else(|reason| usage_exit(&format!("{name}: {reason}")));
        // The generated files carry the package version only, so they do not change with
        // every commit.
        let package = version.split(' ').next().unwrap_or(version);
        let command = command::<A>(package);
        let mut out = Vec::new();
        let written =
            crate::generate::render(command, kind, &mut out).and_then(|()| write_stdout(&out));
        match written {
            Ok(()) => std::process::exit(0),
            Err(err) => usage_exit(&format!("{name}: writing the generated file: {err}")),
        }
    }
    let mut command = command::<A>(version);
    let parsed = command
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|mut matches| A::from_arg_matches_mut(&mut matches))
        .map_err(|err| err.format(&mut command));
    match parsed {
        Ok(args) => args,
        Err(err) => match err.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                err.exit()
            }
            _ => usage_exit(&usage_error_line(name, &err)),
        },
    }
}

/// `A`'s definition with `version`, and with each (sub)command's after-help moved to `--help`
/// only, `-h` pointing there.
pub fn command<A: clap::CommandFactory>(version: &'static str) -> clap::Command {
    fn short_and_long(command: clap::Command) -> clap::Command {
        let names: Vec<String> = command
            .get_subcommands()
            .map(|sub| sub.get_name().to_string())
            .collect();
        let mut command = match command.get_after_help().cloned() {
            Some(after) if command.get_after_long_help().is_none() => {
                // A tool says what 0 to 3 mean for it; exit 4's line is the same for all.
                let after = after.to_string();
                let after = if after.contains("\nExit: ") {
                    format!("{after}\n{}", crate::exit::ENVIRONMENT_FAILED_HELP)
                } else {
                    after
                };
                command.after_long_help(after).after_help(SHORT_AFTER_HELP)
            }
            _ => command,
        };
        for name in names {
            command = command.mut_subcommand(name, short_and_long);
        }
        command
    }
    short_and_long(A::command().version(version))
}

fn usage_exit(line: &str) -> ! {
    let _ = writeln!(std::io::stderr(), "{line}");
    std::process::exit(Exit::BadInput.code().into())
}

/// clap's error as one line: its message and tip, then where to find the usage.
fn usage_error_line(name: &str, err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    for line in rendered.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("Usage:") || line.starts_with("For more information")
        {
            continue;
        }
        if parts.is_empty() || line.starts_with("tip:") {
            parts.push(line.trim_start_matches("error:").trim().to_string());
        }
    }
    if err.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        parts = vec!["a subcommand or argument is required".to_string()];
    }
    format!(
        "{name}: {} (`{name} --help` shows the usage)",
        parts.join("; ")
    )
}

/// Runs a tool's `run` and turns its outcome into the process exit code. Errors are printed once
/// as `tool: message` and end with exit 2, or exit 4 when the environment failed (see
/// [`crate::retryable`]); a panic anywhere prints one line and ends with exit 4, never Rust's
/// 101 with a backtrace hint.
pub fn main(
    name: &'static str,
    common: CommonArgs,
    run: impl FnOnce(&Tool) -> anyhow::Result<Exit>,
) -> ExitCode {
    install_panic_hook(name);
    let tool = Tool {
        name,
        stopwatch: Stopwatch::start(),
        common,
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&tool)));
    match outcome {
        Ok(Ok(exit)) => exit.into(),
        Ok(Err(err)) => {
            let (line, exit) = error_line(&err);
            let _ = writeln!(std::io::stderr(), "{name}: {line}");
            exit.into()
        }
        // The hook printed the line.
        Err(_) => Exit::EnvironmentFailed.into(),
    }
}

/// The error's line and its exit: 4 when a cause in its chain is the environment's (the line
/// then says a retry may help, unless a cause already does), else 2.
pub fn error_line(err: &anyhow::Error) -> (String, Exit) {
    let mut line = error_chain(err);
    match crate::retryable::cause_of(err) {
        Some(cause) => {
            let marker = crate::retryable::EnvironmentFailed::new(cause).to_string();
            if !line.contains(&marker) {
                line.push_str(": ");
                line.push_str(&marker);
            }
            (line, Exit::EnvironmentFailed)
        }
        None => (line, Exit::BadInput),
    }
}

/// Reads a panic's text for an environment's cause, and the message to show for it.
pub type PanicCause = fn(&str) -> Option<(crate::retryable::Cause, String)>;

static PANIC_CAUSE: std::sync::OnceLock<PanicCause> = std::sync::OnceLock::new();

/// Tells the panic hook how to recognise the environment's failures that a library linked into
/// this tool can only report by panicking: libtorch's allocator failing inside one of `tch`'s
/// infallible wrappers is memory exhausted (exit 4 saying so), not "the tool crashed". The
/// first call wins; call it before [`main`].
pub fn read_panics_with(read: PanicCause) {
    let _ = PANIC_CAUSE.set(read);
}

/// Prints the first panic of the process as one line on stderr (what, where, and that exit 4
/// follows); `main` catches the unwinding and exits 4. Later panics (a thread's re-raised on
/// join) print nothing more.
fn install_panic_hook(name: &'static str) {
    static PRINTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    std::panic::set_hook(Box::new(move |info| {
        if PRINTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let payload = info.payload();
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        if let Some((cause, message)) = PANIC_CAUSE.get().and_then(|read| read(&what)) {
            let marker = crate::retryable::EnvironmentFailed::new(cause);
            let _ = writeln!(std::io::stderr(), "{name}: {message}: {marker}");
            return;
        }
        let what: String = what.split_whitespace().collect::<Vec<_>>().join(" ");
        let what: String = what.chars().take(400).collect();
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let marker = crate::retryable::EnvironmentFailed::new(crate::retryable::Cause::Crash);
        let _ = writeln!(
            std::io::stderr(),
            "{name}: internal error{place}: {what}: {marker}"
        );
    }));
}

/// The error and its causes on one line, skipping causes whose text the message already holds
/// (our typed errors print their source themselves).
pub fn error_chain(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::InputError;

    #[derive(Debug, clap::Parser)]
    #[command(name = "demo")]
    struct DemoArgs {
        #[arg(long)]
        count: u32,
    }

    #[test]
    fn usage_errors_are_one_line_naming_the_tool() {
        use clap::Parser;
        let err = DemoArgs::try_parse_from(["demo", "--count", "x"]).unwrap_err();
        let line = usage_error_line("demo", &err);
        assert!(
            line.starts_with("demo: invalid value 'x' for '--count"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        let err = DemoArgs::try_parse_from(["demo", "--cuont", "1"]).unwrap_err();
        let line = usage_error_line("demo", &err);
        assert!(
            line.contains("'--cuont'") && line.contains("tip:"),
            "{line}"
        );
    }

    #[test]
    fn error_chain_does_not_repeat_sources() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let err = anyhow::Error::new(InputError::Io {
            path: "m.yaml".into(),
            source: io,
        })
        .context("reading the manifest");
        assert_eq!(
            error_chain(&err),
            "reading the manifest: m.yaml: No such file"
        );
    }
}
