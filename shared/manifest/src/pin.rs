//! Pinned snapshots: `data.snapshot: <location>@blake3:<digest>` plus a listing of every file's
//! digest, kept so that a tool finding the snapshot moved names the file that changed.
//!
//! The listing is `<location>.pin.json`, beside the snapshot folder or file and never inside it,
//! so it is not part of the data it describes and the digest (`runfn-data-v1`) keeps its meaning:
//! `{"format": "runfn-pin-v1", "digest": "blake3:<hex>", "files": [{"path", "bytes", "blake3"}]}`,
//! files sorted by path. A pin of another snapshot at the same location replaces it; a snapshot
//! whose listing is missing or of another digest is still refused, only without the file's name.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::{DataDigest, DigestError, FileDigest, digest_files};
use crate::parse::{Format, parse_manifest};

pub const LISTING_FORMAT: &str = "runfn-pin-v1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listing {
    pub format: String,
    pub digest: String,
    pub files: Vec<FileDigest>,
}

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error(transparent)]
    Digest(#[from] DigestError),
    #[error("{snapshot}: {change} since {since}")]
    Moved {
        snapshot: String,
        change: String,
        /// When the expected digest was taken: `it was pinned as blake3:...`.
        since: String,
    },
    #[error("{path}: {message}")]
    Listing { path: PathBuf, message: String },
}

/// Where the listing of the snapshot at `location` lives: `<location>.pin.json`.
pub fn listing_path(location: &Path) -> PathBuf {
    let mut name = location
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "snapshot".into());
    name.push(".pin.json");
    location.with_file_name(name)
}

/// Writes the listing of the snapshot at `root`, digested as `digest` with `files`, atomically.
pub fn write_listing(
    root: &Path,
    digest: &DataDigest,
    files: Vec<FileDigest>,
) -> Result<PathBuf, PinError> {
    let listing = Listing {
        format: LISTING_FORMAT.to_string(),
        digest: digest.digest.clone(),
        files,
    };
    let path = listing_path(root);
    let text = serde_json::to_string(&listing).expect("listings serialize");
    runfn_core::atomic::write_bytes_atomic(&path, format!("{text}\n").as_bytes()).map_err(|e| {
        PinError::Listing {
            path: path.clone(),
            message: e.to_string(),
        }
    })?;
    Ok(path)
}

/// Digests the snapshot at `root` and refuses it unless it hashes to `pinned`, naming the first
/// file (by path) that was added, removed or changed when the listing says.
pub fn verify(
    root: &Path,
    pinned: &str,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<DataDigest, PinError> {
    check(root, pinned, format!("it was pinned as {pinned}"), progress)
}

/// Like [`verify`], for the digest `mf-hash --data-digest` recorded earlier in the same run of an
/// unpinned snapshot: the data a later stage reads is the data the record describes.
pub fn verify_recorded(
    root: &Path,
    recorded: &str,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<DataDigest, PinError> {
    check(
        root,
        recorded,
        format!("mf-hash digested it as {recorded} (mf_hash.data_digest)"),
        progress,
    )
}

fn check(
    root: &Path,
    pinned: &str,
    since: String,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<DataDigest, PinError> {
    let digested = digest_files(root, progress)?;
    check_digested(root, pinned, since, digested)
}

/// Like [`verify`], hashing only the files `hash_these` selects (by their path under the
/// snapshot) and taking every other file's hash from the pin's listing: a part of a job checks
/// the files it reads, and that the snapshot holds the pinned files at their pinned sizes. With
/// no listing of this digest, or a snapshot that is one file, everything is hashed.
pub fn verify_some(
    root: &Path,
    pinned: &str,
    hash_these: &(dyn Fn(&str) -> bool + Sync),
) -> Result<DataDigest, PinError> {
    let pin = match read_listing(&listing_path(root)) {
        Ok(Some(pin)) if pin.digest == pinned && root.is_dir() => pin,
        _ => return verify(root, pinned, &|_| {}),
    };
    let digested = crate::digest::Listing::of(root)?.digest_some(hash_these, &pin.files)?;
    check_digested(root, pinned, format!("it was pinned as {pinned}"), digested)
}

/// Checks a digest already computed (`digested`, e.g. merged from parts) against `pinned`, as
/// [`verify`] does: the same error, naming the file that changed.
pub fn verify_digested(
    root: &Path,
    pinned: &str,
    digested: (DataDigest, Vec<FileDigest>),
) -> Result<DataDigest, PinError> {
    check_digested(root, pinned, format!("it was pinned as {pinned}"), digested)
}

/// [`verify_recorded`] for a digest already computed (merged from parts).
pub fn verify_recorded_digested(
    root: &Path,
    recorded: &str,
    digested: (DataDigest, Vec<FileDigest>),
) -> Result<DataDigest, PinError> {
    check_digested(
        root,
        recorded,
        format!("mf-hash digested it as {recorded} (mf_hash.data_digest)"),
        digested,
    )
}

fn check_digested(
    root: &Path,
    pinned: &str,
    since: String,
    (digest, files): (DataDigest, Vec<FileDigest>),
) -> Result<DataDigest, PinError> {
    if digest.digest == pinned {
        return Ok(digest);
    }
    let listing = listing_path(root);
    let change = match read_listing(&listing) {
        Ok(Some(pin)) if pin.digest == pinned => first_change(root, &pin.files, &files)
            .unwrap_or_else(|| format!("it hashes to {}", digest.digest)),
        Ok(Some(pin)) => format!(
            "it hashes to {}, and its listing {} is of {}, so which file changed is unknown; it changed",
            digest.digest,
            listing.display(),
            pin.digest
        ),
        Ok(None) => format!(
            "it hashes to {}, and without a listing ({}) which file changed is unknown; it changed",
            digest.digest,
            listing.display()
        ),
        Err(err) => return Err(err),
    };
    Err(PinError::Moved {
        snapshot: root.display().to_string(),
        change,
        since,
    })
}

fn read_listing(path: &Path) -> Result<Option<Listing>, PinError> {
    let text =
        match runfn_core::side_file::read_bounded_text(path, runfn_core::side_file::JSON_LIMIT) {
            Ok(text) => text,
            Err(runfn_core::InputError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(None);
            }
            Err(err) => {
                // The listing's path is said once, by PinError.
                let message = match err {
                    runfn_core::InputError::Field { message, .. } => message,
                    runfn_core::InputError::Io { source, .. } => source.to_string(),
                    other => other.to_string(),
                };
                return Err(PinError::Listing {
                    path: path.to_path_buf(),
                    message,
                });
            }
        };
    let listing: Listing = serde_json::from_str(&text).map_err(|e| PinError::Listing {
        path: path.to_path_buf(),
        message: format!("not a {LISTING_FORMAT} listing: {e}"),
    })?;
    if listing.format != LISTING_FORMAT {
        return Err(PinError::Listing {
            path: path.to_path_buf(),
            message: format!("format `{}`, expected `{LISTING_FORMAT}`", listing.format),
        });
    }
    Ok(Some(listing))
}

/// The first difference by path between the pinned files and those found now, as a phrase.
fn first_change(root: &Path, pinned: &[FileDigest], now: &[FileDigest]) -> Option<String> {
    let name = |relative: &str| {
        if root.is_file() {
            root.display().to_string()
        } else {
            root.join(relative).display().to_string()
        }
    };
    let (mut a, mut b) = (pinned.iter().peekable(), now.iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => return None,
            (Some(old), None) => return Some(format!("{} was removed", name(&old.path))),
            (None, Some(new)) => return Some(format!("{} was added", name(&new.path))),
            (Some(old), Some(new)) => match old.path.as_bytes().cmp(new.path.as_bytes()) {
                std::cmp::Ordering::Less => {
                    return Some(format!("{} was removed", name(&old.path)));
                }
                std::cmp::Ordering::Greater => {
                    return Some(format!("{} was added", name(&new.path)));
                }
                std::cmp::Ordering::Equal if old != new => {
                    let size = if old.bytes == new.bytes {
                        format!("same {} bytes, other content", new.bytes)
                    } else {
                        format!("{} bytes, now {}", old.bytes, new.bytes)
                    };
                    return Some(format!("{} changed ({size})", name(&new.path)));
                }
                std::cmp::Ordering::Equal => {
                    a.next();
                    b.next();
                }
            },
        }
    }
}

/// `text` with the value of `data.snapshot` replaced by `new_value` and nothing else touched:
/// comments, order and formatting stay. The value's text is found where it is written plainly
/// or quoted; the result is parsed again and must differ from the original in that field only.
pub fn replace_snapshot(text: &str, format: Format, new_value: &str) -> Result<String, String> {
    let before = parse_manifest(text, format, "the manifest").map_err(|e| e.to_string())?;
    let old_value = before
        .pointer("/data/snapshot")
        .and_then(|v| v.as_str())
        .ok_or("data.snapshot is missing or not a string")?;
    let mut expected = before.clone();
    expected["data"]["snapshot"] = new_value.into();
    for (start, _) in text.match_indices(old_value) {
        let end = start + old_value.len();
        let quote = text[..start].chars().next_back();
        let closing = text[end..].chars().next();
        let written = match (quote, closing) {
            (Some('"'), Some('"')) => json_inner(new_value),
            (Some('\''), Some('\'')) => new_value.replace('\'', "''"),
            _ if format == Format::Json => continue,
            _ if is_plain(new_value) => new_value.to_string(),
            _ => format!("\"{}\"", json_inner(new_value)),
        };
        let candidate = format!("{}{written}{}", &text[..start], &text[end..]);
        if parse_manifest(&candidate, format, "the manifest").ok() == Some(expected.clone()) {
            return Ok(candidate);
        }
    }
    Err(format!(
        "data.snapshot: cannot find the text of `{old_value}` to replace (is it escaped or split over lines?); write it plainly on one line"
    ))
}

fn json_inner(value: &str) -> String {
    let quoted = serde_json::to_string(value).expect("strings serialize");
    quoted[1..quoted.len() - 1].to_string()
}

/// Safe as a plain YAML scalar in any position.
fn is_plain(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/@=+-~".contains(c) || c == ':')
        && !value.contains(": ")
        && !value.starts_with(['-', ':', '@', '~'])
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "# the run\nrun_id: r1\ndata:\n  snapshot: ./lake/churn@snapshot=1  # today's\n  label: y\nseed: 7\n";

    #[test]
    fn replaces_only_the_snapshot_value() {
        let digest = format!("blake3:{}", "ab".repeat(32));
        let new_value = format!("./lake/churn-2@{digest}");
        let out = replace_snapshot(YAML, Format::Yaml, &new_value).unwrap();
        assert_eq!(out, YAML.replace("./lake/churn@snapshot=1", &new_value));
        let quoted = YAML.replace("./lake/churn@snapshot=1", "'./lake/churn@snapshot=1'");
        let out = replace_snapshot(&quoted, Format::Yaml, "it's here@v1").unwrap();
        assert!(
            out.contains("snapshot: 'it''s here@v1'  # today's"),
            "{out}"
        );
        let json = r#"{"run_id": "r1", "data": {"snapshot": "a@v1", "label": "y"}}"#;
        let out = replace_snapshot(json, Format::Json, "b@v2").unwrap();
        assert_eq!(out, json.replace("a@v1", "b@v2"));
    }

    #[test]
    fn a_comment_with_the_same_text_is_left_alone() {
        let text = format!("# was ./lake/churn@snapshot=1\n{YAML}");
        let out = replace_snapshot(&text, Format::Yaml, "x@v2").unwrap();
        assert!(out.starts_with("# was ./lake/churn@snapshot=1\n"), "{out}");
        assert!(out.contains("  snapshot: x@v2  # today's"), "{out}");
    }

    #[test]
    fn a_changed_added_or_removed_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("snap");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.csv"), "x\n1\n").unwrap();
        std::fs::write(root.join("b.csv"), "x\n2\n").unwrap();
        let (digest, files) = digest_files(&root, &|_| {}).unwrap();
        let listing = write_listing(&root, &digest, files).unwrap();
        assert_eq!(listing, dir.path().join("snap.pin.json"));
        assert!(verify(&root, &digest.digest, &|_| {}).is_ok());

        std::fs::write(root.join("b.csv"), "x\n3\n").unwrap();
        let err = verify(&root, &digest.digest, &|_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("snap/b.csv changed"), "{err}");
        std::fs::write(root.join("b.csv"), "x\n2\n").unwrap();
        std::fs::write(root.join("0.csv"), "x\n2\n").unwrap();
        let err = verify(&root, &digest.digest, &|_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("snap/0.csv was added"), "{err}");
        std::fs::remove_file(root.join("0.csv")).unwrap();
        std::fs::remove_file(root.join("a.csv")).unwrap();
        let err = verify(&root, &digest.digest, &|_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("snap/a.csv was removed"), "{err}");

        std::fs::remove_file(&listing).unwrap();
        let err = verify(&root, &digest.digest, &|_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("which file changed is unknown"), "{err}");
    }
}
