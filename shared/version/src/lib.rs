//! The version every tool's `--version` prints: `0.1.0 (commit 1a2b3c4d5e6f)`, or the package
//! version alone when the build had no git checkout to read.

/// The package version.
pub const PACKAGE: &str = env!("CARGO_PKG_VERSION");

/// The commit the tools were built from (12 hex digits), empty when unknown.
pub const COMMIT: &str = env!("RUNFN_COMMIT");

/// `PACKAGE (commit COMMIT)`, or `PACKAGE` when the commit is unknown.
pub fn long() -> &'static str {
    static LONG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LONG.get_or_init(|| {
        if COMMIT.is_empty() {
            PACKAGE.to_string()
        } else {
            format!("{PACKAGE} (commit {COMMIT})")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_version_names_the_package_and_the_commit_when_known() {
        assert!(long().starts_with(PACKAGE));
        assert_eq!(long().contains("(commit "), !COMMIT.is_empty());
        assert!(COMMIT.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
