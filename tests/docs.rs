//! Docs that run: every fenced block marked ```` ```sh runnable ```` in README.md, GUIDE.md and
//! docs/*.md is executed, in order, with the tools that `make install` put on a PATH, so a
//! documented command cannot rot. Each file's blocks share one fresh folder holding a `testdata`
//! link to the clone's; `/srv/runfn` in a block stands for the clone. The only substitutions are
//! paths.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A runnable block: the file, its first line's number and its text.
#[derive(Debug)]
struct Block {
    file: String,
    line: usize,
    text: String,
}

/// The runnable blocks of `markdown`, in order.
fn runnable_blocks(file: &str, markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((number, line)) = lines.next() {
        let trimmed = line.trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            continue;
        };
        let fence_indent = line.len() - trimmed.len();
        let mut text = String::new();
        for (_, body) in lines.by_ref() {
            if body.trim_start().starts_with("```") {
                break;
            }
            text.push_str(body.get(fence_indent..).unwrap_or(body.trim_start()));
            text.push('\n');
        }
        if info.split_whitespace().collect::<Vec<_>>() == ["sh", "runnable"] {
            blocks.push(Block {
                file: file.to_string(),
                line: number + 1,
                text,
            });
        }
    }
    blocks
}

/// The documentation files: README.md, GUIDE.md and docs/*.md.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(ROOT);
    let mut files = vec![root.join("README.md"), root.join("GUIDE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Runs `block` with bash in `work`, with `path` first on PATH; Err: what it printed.
fn run_block(block: &Block, work: &Path, path: &Path) -> Result<(), String> {
    let script = block.text.replace("/srv/runfn", ROOT);
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(work)
        .env(
            "PATH",
            format!(
                "{}:{}",
                path.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("BUILD_PROFILE", "dev")
        .env("CARGO", "true")
        .env_remove("RUNFN_REGISTRY")
        .env_remove("RUNFN_ALERT_CMD")
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}:{}: the block exited {:?}\n--- block ---\n{}--- stdout (tail) ---\n{}\n--- stderr ---\n{}",
            block.file,
            block.line,
            out.status.code(),
            block.text,
            tail(&out.stdout),
            tail(&out.stderr)
        ))
    }
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let chars: Vec<char> = text.chars().collect();
    chars[chars.len().saturating_sub(3000)..].iter().collect()
}

fn work_folder(dir: &Path, name: &str) -> PathBuf {
    let work = dir.join(name);
    std::fs::create_dir_all(&work).unwrap();
    std::os::unix::fs::symlink(Path::new(ROOT).join("testdata"), work.join("testdata")).unwrap();
    work
}

#[test]
fn every_runnable_block_in_the_docs_runs_with_the_installed_tools() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    crate::reference::install(&prefix);
    let bin = prefix.join("bin");
    let mut counts = Vec::new();
    for document in documents() {
        let name = document.strip_prefix(ROOT).unwrap().display().to_string();
        let blocks = runnable_blocks(&name, &std::fs::read_to_string(&document).unwrap());
        let work = work_folder(dir.path(), &name.replace('/', "-"));
        for block in &blocks {
            if let Err(failure) = run_block(block, &work, &bin) {
                panic!("{failure}");
            }
        }
        counts.push((name, blocks.len()));
    }
    let count = |file: &str| counts.iter().find(|(name, _)| name == file).unwrap().1;
    // The README's pipeline and the guide's walk-throughs are runnable.
    assert!(count("README.md") >= 1, "{counts:?}");
    assert!(count("GUIDE.md") >= 3, "{counts:?}");
}

/// The runner fails a block whose flag no tool knows (a flag renamed in the code and not in the
/// docs), naming the file and line.
#[test]
fn a_block_with_a_renamed_flag_fails() {
    let markdown = "text\n\n```sh runnable\nnoise-floor --values 0.8,0.81 --methd range\n```\n";
    let blocks = runnable_blocks("GUIDE.md", markdown);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].line, 3);
    let dir = tempfile::tempdir().unwrap();
    let work = work_folder(dir.path(), "guide");
    let bin = crate::util::bin("noise-floor");
    let failure = run_block(&blocks[0], &work, bin.parent().unwrap()).unwrap_err();
    assert!(
        failure.starts_with("GUIDE.md:3: the block exited Some(2)"),
        "{failure}"
    );
    assert!(failure.contains("'--methd'"), "{failure}");
    // The same block with the flag's real name runs.
    let fixed = Block {
        text: blocks[0].text.replace("--methd", "--method"),
        ..blocks.into_iter().next().unwrap()
    };
    run_block(&fixed, &work, bin.parent().unwrap()).unwrap();
}

#[test]
fn only_blocks_marked_runnable_are_collected() {
    let markdown = "```sh\nrm -rf /\n```\n\n```sh runnable\necho one\n```\n\n  ```sh runnable\n  echo two\n  ```\n```rust\nfn main() {}\n```\n";
    let blocks = runnable_blocks("X.md", markdown);
    let texts: Vec<&str> = blocks.iter().map(|b| b.text.as_str()).collect();
    assert_eq!(texts, ["echo one\n", "echo two\n"]);
}
