//! Filling `code.commit` from git, refusing a working tree whose code differs from the commit.

use std::path::Path;
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("--commit-from-git: could not run git in {dir}: {source}")]
    Spawn {
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--commit-from-git: {dir} is not a git work tree with a commit ({stderr})")]
    NoCommit { dir: String, stderr: String },
    #[error(
        "--commit-from-git: the work tree in {dir} has uncommitted changes, so HEAD does not describe the code: {files}"
    )]
    Dirty { dir: String, files: String },
}

/// The full commit id of HEAD in `dir`, refusing when tracked or untracked (not ignored) files differ.
pub fn clean_head_commit(dir: &Path) -> Result<String, GitError> {
    let dir_name = dir.display().to_string();
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .map_err(|source| GitError::Spawn {
                dir: dir_name.clone(),
                source,
            })
    };
    let head = git(&["rev-parse", "--verify", "HEAD"])?;
    if !head.status.success() {
        return Err(GitError::NoCommit {
            dir: dir_name,
            stderr: String::from_utf8_lossy(&head.stderr).trim().to_string(),
        });
    }
    let status = git(&["status", "--porcelain"])?;
    let changed: Vec<String> = String::from_utf8_lossy(&status.stdout)
        .lines()
        .map(|line| line.get(3..).unwrap_or(line).to_string())
        .collect();
    if !status.status.success() || !changed.is_empty() {
        let mut files = changed
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if changed.len() > 5 {
            files.push_str(&format!(" and {} more", changed.len() - 5));
        }
        return Err(GitError::Dirty {
            dir: dir_name,
            files,
        });
    }
    Ok(String::from_utf8_lossy(&head.stdout).trim().to_string())
}
