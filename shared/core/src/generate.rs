//! `TOOL --generate KIND`: the tool's man page or a shell completion script, rendered from its
//! own clap definition (as `rg --generate` does), so the reference cannot disagree with the
//! flags. `make install` writes them next to the binaries; `docs/man/` and `completions/` hold
//! copies that a test keeps current.

use std::io::Write;

use clap_complete::Shell;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, roman};

/// What `--generate` can print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Man,
    Complete(Shell),
}

/// The values `--generate` takes, as the help and errors list them.
pub const KINDS: &str = "man, complete-bash, complete-zsh, complete-fish";

impl Kind {
    pub fn parse(text: &str) -> Option<Kind> {
        match text {
            "man" => Some(Kind::Man),
            "complete-bash" => Some(Kind::Complete(Shell::Bash)),
            "complete-zsh" => Some(Kind::Complete(Shell::Zsh)),
            "complete-fish" => Some(Kind::Complete(Shell::Fish)),
            _ => None,
        }
    }
}

/// The `--generate` request in `args` (the process's arguments without the program name):
/// `None` when the first argument is not `--generate`, else the kind or the reason it is wrong.
pub fn requested(args: &[String]) -> Option<Result<Kind, String>> {
    let first = args.first()?;
    let value = if first == "--generate" {
        match args.get(1) {
            Some(value) => value.as_str(),
            None => return Some(Err(format!("--generate needs one of {KINDS}"))),
        }
    } else {
        first.strip_prefix("--generate=")?
    };
    let taken = if first == "--generate" { 2 } else { 1 };
    if args.len() > taken {
        return Some(Err(format!(
            "--generate takes no other arguments (got `{}`)",
            args[taken]
        )));
    }
    Some(
        Kind::parse(value).ok_or_else(|| format!("--generate takes one of {KINDS}, not `{value}`")),
    )
}

/// Writes `kind` for `command` (the tool's full definition, version included) to `out`.
pub fn render(mut command: clap::Command, kind: Kind, out: &mut dyn Write) -> std::io::Result<()> {
    match kind {
        Kind::Man => man_page(command, out),
        Kind::Complete(shell) => {
            let name = command.get_name().to_string();
            clap_complete::generate(shell, &mut command, name, out);
            Ok(())
        }
    }
}

/// The man page: clap_mangen's sections, except that the long after-help (examples, the output
/// section, exit codes) and each subcommand's long help are kept as written (`.nf`), since
/// filled text would run the examples' lines together.
fn man_page(command: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    let man = Man::new(command.clone()).manual("runfn");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    let mut roff = Roff::new();
    if let Some(after) = command
        .get_after_long_help()
        .or_else(|| command.get_after_help())
    {
        verbatim(&mut roff, "DETAILS", &after.to_string());
    }
    let mut command = command;
    let names: Vec<String> = command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in names {
        let tool = command.get_name().to_string();
        if let Some(sub) = command.find_subcommand_mut(&name) {
            let mut sub = sub.clone().bin_name(format!("{tool} {name}"));
            let help = sub.render_long_help().to_string();
            verbatim(
                &mut roff,
                &format!("{} {}", tool, name).to_uppercase(),
                &help,
            );
        }
    }
    roff.to_writer(out)?;
    man.render_version_section(out)
}

/// A section whose lines are printed as they are (no filling, no adjusting).
fn verbatim(roff: &mut Roff, heading: &str, text: &str) {
    roff.control("SH", [heading]);
    roff.control("nf", None::<&str>);
    for line in text.lines() {
        roff.text([roman(line)]);
    }
    roff.control("fi", None::<&str>);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn generate_is_recognised_only_as_the_first_argument() {
        assert_eq!(
            requested(&args(&["--generate", "man"])),
            Some(Ok(Kind::Man))
        );
        assert_eq!(
            requested(&args(&["--generate=complete-zsh"])),
            Some(Ok(Kind::Complete(Shell::Zsh)))
        );
        assert_eq!(
            requested(&args(&["--seed", "7", "--generate", "man"])),
            None
        );
        assert_eq!(requested(&args(&[])), None);
        assert!(matches!(requested(&args(&["--generate"])), Some(Err(_))));
        assert!(
            matches!(requested(&args(&["--generate", "pdf"])), Some(Err(e)) if e.contains("not `pdf`"))
        );
        assert!(matches!(
            requested(&args(&["--generate", "man", "x"])),
            Some(Err(_))
        ));
    }

    #[test]
    fn the_man_page_keeps_the_examples_lines_and_lists_subcommands() {
        let command = clap::Command::new("demo")
            .version("1.2.3")
            .about("Does a thing.")
            .arg(clap::Arg::new("seed").long("seed").help("The seed."))
            .after_long_help("Examples:\n  demo --seed 7\n.starts with a dot")
            .subcommand(clap::Command::new("pin").about("Pins it."));
        let mut out = Vec::new();
        render(command, Kind::Man, &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(page.contains(".TH demo 1"), "{page}");
        assert!(page.contains("\\-\\-seed"), "{page}");
        assert!(
            page.contains(".nf\nExamples:\n  demo \\-\\-seed 7\n"),
            "{page}"
        );
        // A line starting with a dot would be a roff request; it is escaped.
        assert!(page.contains("\n\\&.starts with a dot\n"), "{page}");
        assert!(page.contains(".SH \"DEMO PIN\"\n.nf\nPins it."), "{page}");
        assert!(page.contains("1.2.3"), "{page}");
    }

    #[test]
    fn completions_name_every_flag() {
        let command = clap::Command::new("demo").arg(clap::Arg::new("seed").long("seed"));
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            render(command.clone(), Kind::Complete(shell), &mut out).unwrap();
            let script = String::from_utf8(out).unwrap();
            assert!(script.contains("seed"), "{shell}: {script}");
        }
    }
}
