//! Puts the commit the tools are built from into `RUNFN_COMMIT` (empty outside a git checkout,
//! as in a source tarball). It lives in this tiny crate, which only the binaries use, so a new
//! commit relinks the tools without recompiling the library crates.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=RUNFN_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it points at (a commit) and
    // packed-refs (a ref packed by gc).
    for path in ["HEAD", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo:rerun-if-changed={path}");
    }
}
