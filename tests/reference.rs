//! The generated reference: man pages and completions rendered by each tool (`--generate`) and
//! BENCHMARKS.md rendered from bench/*.json match the checked-in copies (`make reference`
//! rewrites them); `-h` is short and `--help` long; `--version` names the commit; and
//! `make install` puts the tools, their man pages and completions under a prefix, where `man`
//! and bash find them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::bin;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every tool, as the folders under tools/ name them.
pub fn tools() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("tools"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 13, "{names:?}");
    names
}

fn stdout_of(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The checked-in copies of `tool`'s generated files: (kind, path).
fn checked_in(tool: &str) -> Vec<(&'static str, PathBuf)> {
    let root = Path::new(ROOT);
    vec![
        ("man", root.join(format!("docs/man/{tool}.1"))),
        (
            "complete-bash",
            root.join(format!("completions/bash/{tool}")),
        ),
        (
            "complete-zsh",
            root.join(format!("completions/zsh/_{tool}")),
        ),
        (
            "complete-fish",
            root.join(format!("completions/fish/{tool}.fish")),
        ),
    ]
}

#[test]
fn man_pages_and_completions_are_up_to_date() {
    let mut stale = Vec::new();
    for tool in tools() {
        for (kind, path) in checked_in(&tool) {
            let generated = stdout_of(Command::new(bin(&tool)).args(["--generate", kind]));
            assert!(
                generated.len() > 200,
                "{tool} --generate {kind}: {generated}"
            );
            if std::fs::read_to_string(&path).ok().as_deref() != Some(generated.as_str()) {
                stale.push(path.strip_prefix(ROOT).unwrap().display().to_string());
            }
        }
    }
    assert!(
        stale.is_empty(),
        "out of date (run `make reference` and commit): {stale:?}"
    );
}

#[test]
fn benchmarks_md_is_generated_from_the_bench_files() {
    let generated = stdout_of(
        Command::new("python3")
            .arg(Path::new(ROOT).join("scripts/benchmarks-md.py"))
            .current_dir(ROOT),
    );
    let checked_in = std::fs::read_to_string(Path::new(ROOT).join("BENCHMARKS.md")).unwrap();
    assert!(
        generated == checked_in,
        "BENCHMARKS.md differs from scripts/benchmarks-md.py's output: run `make reference`"
    );
    // Every bench file is in it, with its headline ratio.
    for entry in std::fs::read_dir(Path::new(ROOT).join("bench")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".json") {
            assert!(checked_in.contains(&format!("## {stem}\n")), "{stem}");
        }
    }
    assert!(checked_in.contains("`shapes.short.faster_peer_over_shardify` |"));
}

#[test]
fn generate_refuses_what_it_cannot_write() {
    let out = Command::new(bin("train"))
        .args(["--generate", "pdf"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("train: --generate takes one of man, complete-bash")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn short_help_is_short_and_long_help_has_the_examples() {
    for tool in tools() {
        let short = stdout_of(Command::new(bin(&tool)).arg("-h"));
        let long = stdout_of(Command::new(bin(&tool)).arg("--help"));
        assert!(!short.contains("Examples:"), "{tool} -h:\n{short}");
        assert!(short.contains("--help"), "{tool} -h:\n{short}");
        assert!(long.contains("Examples:"), "{tool} --help:\n{long}");
        assert!(long.contains("Exit"), "{tool} --help:\n{long}");
        // What exit 4 means is written once (in runfn-core) and added to every tool's help.
        let line = "\n4 the environment failed (a store unreachable or timing out";
        assert_eq!(long.matches(line).count(), 1, "{tool} --help:\n{long}");
        assert!(
            long.len() > short.len() + 200,
            "{tool}: --help is not longer than -h"
        );
    }
}

#[test]
fn version_names_the_package_and_the_commit() {
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(ROOT)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8(out.stdout).unwrap().trim().to_string());
    for tool in tools() {
        let version = stdout_of(Command::new(bin(&tool)).arg("--version"));
        let expected = match &head {
            Some(commit) => format!("{tool} 0.1.0 (commit {commit})\n"),
            None => format!("{tool} 0.1.0\n"),
        };
        assert_eq!(
            version, expected,
            "{tool} --version (rebuild after a commit)"
        );
    }
}

/// `make install PREFIX=prefix` with the dev build (`INSTALL_PROFILE=dev`; the test builds
/// nothing).
pub fn install(prefix: &Path) {
    let out = Command::new("make")
        .env("INSTALL_PROFILE", "dev")
        .args(["--no-print-directory", "-C", ROOT, "install", "CARGO=true"])
        .arg(format!("PREFIX={}", prefix.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "make install: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn make_install_puts_tools_man_pages_and_completions_under_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    install(&prefix);
    for tool in tools() {
        let installed = prefix.join("bin").join(&tool);
        let version = stdout_of(Command::new(&installed).arg("--version"));
        assert!(version.starts_with(&format!("{tool} 0.1.0")), "{version}");
        for path in [
            format!("share/man/man1/{tool}.1"),
            format!("share/bash-completion/completions/{tool}"),
            format!("share/zsh/site-functions/_{tool}"),
            format!("share/fish/vendor_completions.d/{tool}.fish"),
        ] {
            assert!(prefix.join(&path).is_file(), "{path}");
        }
    }
    // The stage wrapper the cluster specs run sits beside the tools.
    let stage = prefix.join("bin/runfn-stage");
    let usage = Command::new(&stage).output().unwrap();
    assert_eq!(usage.status.code(), Some(2), "{}", stage.display());
    // man finds the page under the prefix and renders it (no warnings from the roff).
    if Command::new("man").arg("--version").output().is_ok() {
        let man = Command::new("man")
            .env("MANWIDTH", "100")
            .env("MANPAGER", "cat")
            .args(["-M"])
            .arg(prefix.join("share/man"))
            .arg("train")
            .output()
            .unwrap();
        // Without a terminal man still overstrikes bold text (`t\x08t`); keep the letters.
        let mut page = String::new();
        for c in String::from_utf8_lossy(&man.stdout).chars() {
            if c == '\x08' {
                page.pop();
            } else {
                page.push(c);
            }
        }
        assert!(
            man.status.success(),
            "{}",
            String::from_utf8_lossy(&man.stderr)
        );
        assert!(
            page.contains("--resume") || page.contains("--threads"),
            "{page}"
        );
        assert!(page.contains("Examples:"), "{page}");
        assert!(
            String::from_utf8_lossy(&man.stderr).trim().is_empty(),
            "man warned: {}",
            String::from_utf8_lossy(&man.stderr)
        );
    }
    // bash loads the completion and completes a flag.
    let script = prefix.join("share/bash-completion/completions/train");
    let complete = stdout_of(Command::new("bash").arg("-c").arg(format!(
        "source '{}' && complete -p train && COMP_WORDS=(train --thr) COMP_CWORD=1 COMP_LINE='train --thr' COMP_POINT=11 && _train train --thr train && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    )));
    assert!(complete.contains("-F _train train"), "{complete}");
    assert!(complete.contains("--threads"), "{complete}");
}
