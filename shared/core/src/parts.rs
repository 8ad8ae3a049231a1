//! A tool's work cut into parts that run anywhere (a Slurm job array, a Kubernetes Indexed Job),
//! and put back together by a merge that writes what one process would have written.
//!
//! `--part K/N` names part K (0-based, as `SLURM_ARRAY_TASK_ID` and `JOB_COMPLETION_INDEX` count)
//! of N. The units of work (files, runs of Parquet row groups) are listed the same way on every
//! machine, and each part takes a contiguous run of them by their weight (bytes): unit i goes to
//! the part in whose share of the total weight its middle lies. The assignment depends on the
//! listing alone, so every part and the merge agree on it without talking to each other.
//!
//! Each part writes its partial to `<dir>/<tool>.part-K-of-N.json` (atomically); the merge reads
//! every `<tool>.part-*-of-N.json` there and refuses a missing, doubled or foreign one by name.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// Part `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub index: u32,
    pub count: u32,
}

/// `--part K/N` and `--parts DIR`, as every tool that can run in parts takes them: with both, do
/// part K and write its partial into DIR; with `--parts` alone, merge DIR's partials.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PartArgs {
    /// Do part K of N (0-based: SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX) and write its
    /// partial into --parts; the merge (the same command without --part) writes the record.
    #[arg(long, value_name = "K/N", value_parser = Part::parse, requires = "parts")]
    pub part: Option<Part>,
    /// The folder of the parts' partials: written with --part, merged without it.
    #[arg(long, value_name = "DIR")]
    pub parts: Option<PathBuf>,
}

/// What a part prints on stdout: where its partial went and what it covered.
#[derive(Debug, Clone, Serialize)]
pub struct PartDone {
    pub tool: String,
    pub part: String,
    pub partial: String,
    /// Units of work (files, runs of row groups) this part did, of how many.
    pub units: u64,
    pub of: u64,
}

impl PartDone {
    /// `{"part": {...}}`, one line.
    pub fn line(&self) -> String {
        format!("{}\n", serde_json::json!({ "part": self }))
    }
}

/// Writes `tool`'s partial for `part` into `dir` (made when missing) atomically, and what the
/// part prints: it did `units` of `of` units of work.
pub fn write_partial<T: Serialize>(
    dir: &Path,
    tool: &str,
    part: Part,
    partial: &T,
    (units, of): (u64, u64),
) -> Result<PartDone, InputError> {
    std::fs::create_dir_all(dir).map_err(|source| InputError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let file = part.path(dir, tool);
    let text = serde_json::to_string(partial).expect("a partial serializes");
    crate::atomic::write_bytes_atomic(&file, text.as_bytes())?;
    Ok(PartDone {
        tool: tool.into(),
        part: part.to_string(),
        partial: file.display().to_string(),
        units,
        of,
    })
}

/// The most parts a run may be cut into.
pub const MAX_PARTS: u32 = 100_000;

impl Part {
    /// Parses `K/N` (`--part`), 0 ≤ K < N.
    pub fn parse(text: &str) -> Result<Part, String> {
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}` is not K/N (e.g. 0/4: the first of four parts)"))?;
        let number = |what: &str, t: &str| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{text}`: {what} `{t}` is not a whole number"))
        };
        let (index, count) = (number("K", index)?, number("N", count)?);
        if count == 0 || count > MAX_PARTS {
            return Err(format!(
                "`{text}`: N must be 1 to {MAX_PARTS}, the number of parts"
            ));
        }
        if index >= count {
            return Err(format!(
                "`{text}`: K counts from 0, so it must be below N ({} parts: 0/{count} to {}/{count})",
                count,
                count - 1
            ));
        }
        Ok(Part { index, count })
    }

    /// The partial's file name for `tool`.
    pub fn file_name(&self, tool: &str) -> String {
        format!("{tool}.part-{}-of-{}.json", self.index, self.count)
    }

    pub fn path(&self, dir: &Path, tool: &str) -> PathBuf {
        dir.join(self.file_name(tool))
    }
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A file's name relative to the snapshot's root, `/`-separated (how parts name the files they cut).
pub fn relative_name(root: &std::path::Path, file: &std::path::Path) -> String {
    let relative = file.strip_prefix(root).unwrap_or(file);
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The part each unit goes to, given the units' weights in listing order: contiguous runs,
/// balanced by weight (a unit of weight 0 counts as 1, so an empty file is placed too).
pub fn assign(weights: &[u64], count: u32) -> Vec<u32> {
    let weights: Vec<u128> = weights.iter().map(|&w| u128::from(w.max(1))).collect();
    let total: u128 = weights.iter().sum();
    let mut before: u128 = 0;
    weights
        .iter()
        .map(|&w| {
            // The unit's middle, 2·before + w over 2·total, scaled to parts.
            let middle = 2 * before + w;
            before += w;
            ((middle * u128::from(count)) / (2 * total.max(1))).min(u128::from(count - 1)) as u32
        })
        .collect()
}

/// A fingerprint of a listing (the units' names and weights, in order): a part and the merge
/// that find different fingerprints were not cutting the same input.
pub fn fingerprint<'a>(units: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"runfn-parts-listing-v1\n");
    for (name, weight) in units {
        hasher.update(&(name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update(&weight.to_le_bytes());
    }
    format!("blake3:{}", hasher.finalize().to_hex())
}

/// What every partial carries, whatever the tool: who wrote it, which part of how many, and the
/// listing it cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartHeader {
    /// `<tool>-part-v1`.
    pub format: String,
    pub part: Part,
    /// The listing's fingerprint ([`fingerprint`]).
    pub listing: String,
    /// Units in the whole listing, and those this part did.
    pub units: u64,
    pub done: Vec<u64>,
}

/// The partials of `tool` in `dir`, one per part, in part order, parsed by `parse` (which gets
/// the text and the file's name for its errors). Refuses an empty folder, partials of different
/// part counts, and a missing part, naming each.
pub fn read_partials<T>(
    dir: &Path,
    tool: &str,
    parse: impl Fn(&str, &str) -> Result<T, InputError>,
    header: impl Fn(&T) -> &PartHeader,
) -> Result<Vec<T>, InputError> {
    let prefix = format!("{tool}.part-");
    let entries = std::fs::read_dir(dir).map_err(|source| InputError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut found: Vec<(Part, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| InputError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".json"))
        else {
            continue;
        };
        let part = rest
            .split_once("-of-")
            .and_then(|(k, n)| Part::parse(&format!("{k}/{n}")).ok())
            .ok_or_else(|| {
                InputError::field(
                    entry.path().display().to_string(),
                    format!("is not named {tool}.part-K-of-N.json"),
                )
            })?;
        found.push((part, entry.path()));
    }
    let Some(count) = found.first().map(|(p, _)| p.count) else {
        return Err(InputError::field(
            dir.display().to_string(),
            format!(
                "holds no {tool}.part-K-of-N.json: run the parts (--part K/N --parts DIR) first"
            ),
        ));
    };
    if let Some((other, path)) = found.iter().find(|(p, _)| p.count != count) {
        return Err(InputError::field(
            path.display().to_string(),
            format!(
                "is a part of {} where {} holds parts of {count}: one run's parts per folder",
                other.count,
                dir.display()
            ),
        ));
    }
    found.sort_by_key(|(p, _)| p.index);
    let missing: Vec<String> = (0..count)
        .filter(|k| found.binary_search_by_key(k, |(p, _)| p.index).is_err())
        .map(|k| k.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(InputError::field(
            dir.display().to_string(),
            format!(
                "lacks part{} {} of {count}: a part failed or has not finished",
                if missing.len() == 1 { "" } else { "s" },
                shown_list(&missing)
            ),
        ));
    }
    let mut partials = Vec::with_capacity(found.len());
    let mut listing: Option<String> = None;
    for (part, path) in &found {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| InputError::Io {
            path: path.clone(),
            source,
        })?;
        let partial = parse(&text, &origin)?;
        let head = header(&partial);
        if head.part != *part {
            return Err(InputError::field(
                origin,
                format!("says it is part {} but is named part {part}", head.part),
            ));
        }
        match &listing {
            None => listing = Some(head.listing.clone()),
            Some(first) if *first != head.listing => {
                return Err(InputError::field(
                    origin,
                    format!(
                        "cut a different input (listing {}) from part 0 ({first}): the input changed between the parts, or the folder mixes two runs",
                        head.listing
                    ),
                ));
            }
            Some(_) => {}
        }
        partials.push(partial);
    }
    Ok(partials)
}

/// [`read_partials`] of partials written as JSON of type `T`: a file that does not parse as one
/// is refused by name as not `what`'s partial.
pub fn read_json_partials<T: serde::de::DeserializeOwned>(
    dir: &Path,
    tool: &str,
    what: &str,
    header: impl Fn(&T) -> &PartHeader,
) -> Result<Vec<T>, InputError> {
    read_partials(
        dir,
        tool,
        |text, origin| {
            serde_json::from_str::<T>(text)
                .map_err(|e| InputError::field(origin, format!("is not {what}'s partial: {e}")))
        },
        header,
    )
}

/// Whether `dir` holds any partial of `tool` (reducers', whose merge then takes them).
pub fn any_partial(dir: &Path, tool: &str) -> Result<bool, InputError> {
    let prefix = format!("{tool}.part-");
    let entries = std::fs::read_dir(dir).map_err(|source| InputError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(entries
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(&prefix)))
}

fn shown_list(items: &[String]) -> String {
    if items.len() <= 10 {
        items.join(", ")
    } else {
        format!("{}, … ({} in all)", items[..10].join(", "), items.len())
    }
}

impl PartHeader {
    /// Refuses a partial of another format or listing than the merge expects, naming `dir`;
    /// `other` says what a different listing means for this tool's input.
    pub fn check(
        &self,
        dir: &Path,
        format: &str,
        listing: &str,
        other: &str,
    ) -> Result<(), InputError> {
        let refuse = |message: String| InputError::field(dir.display().to_string(), message);
        if self.format != format {
            return Err(refuse(format!(
                "holds partials of format {}, not {format}",
                self.format
            )));
        }
        if self.listing != listing {
            return Err(refuse(format!(
                "holds parts of {other}: the input changed since the parts ran, or the folder is another run's"
            )));
        }
        Ok(())
    }
}

/// Refuses a file a part wrote beside its partial (its rows, its predictions) whose bytes are
/// no longer those the part recorded (`recorded`, a blake3), naming the file and the part.
pub fn check_part_file(path: &Path, part: Part, recorded: &str) -> Result<(), InputError> {
    use crate::side_file::{PART_FILE_LIMIT, blake3_bounded, short_digest};
    let found = blake3_bounded(path, PART_FILE_LIMIT)?;
    if found != recorded {
        return Err(InputError::field(
            path.display().to_string(),
            format!(
                "has blake3 {}, but part {part} recorded {}: the file changed after the part wrote it",
                short_digest(&found),
                short_digest(recorded)
            ),
        ));
    }
    Ok(())
}

/// Checks that the parts' `done` lists cover units `0..units` exactly as [`assign`] gives them.
pub fn check_coverage(headers: &[&PartHeader], assignment: &[u32]) -> Result<(), String> {
    let mut seen = vec![false; assignment.len()];
    for head in headers {
        for &unit in &head.done {
            let at = usize::try_from(unit).unwrap_or(usize::MAX);
            let Some(expected) = assignment.get(at) else {
                return Err(format!(
                    "part {} did unit {unit}, beyond the listing's {}",
                    head.part,
                    assignment.len()
                ));
            };
            if *expected != head.part.index {
                return Err(format!(
                    "part {} did unit {unit}, which belongs to part {expected}",
                    head.part
                ));
            }
            if std::mem::replace(&mut seen[at], true) {
                return Err(format!("unit {unit} was done twice"));
            }
        }
    }
    match seen.iter().position(|s| !s) {
        Some(unit) => Err(format!(
            "unit {unit} (of part {}) was done by no part",
            assignment[unit]
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_of_n_is_read_and_its_mistakes_named() {
        assert_eq!(Part::parse("0/4").unwrap(), Part { index: 0, count: 4 });
        assert_eq!(Part::parse("3/4").unwrap().to_string(), "3/4");
        assert!(Part::parse("4/4").unwrap_err().contains("below N"));
        assert!(Part::parse("1/0").unwrap_err().contains("N must be"));
        assert!(Part::parse("a/4").unwrap_err().contains("K `a`"));
        assert!(Part::parse("2").unwrap_err().contains("not K/N"));
        assert!(Part::parse("-1/4").is_err());
    }

    #[test]
    fn units_go_in_contiguous_runs_balanced_by_weight() {
        assert_eq!(assign(&[10, 10, 10, 10], 2), [0, 0, 1, 1]);
        assert_eq!(assign(&[10, 10, 10, 10], 4), [0, 1, 2, 3]);
        // One heavy unit takes a part of its own.
        assert_eq!(assign(&[100, 1, 1, 1], 2), [0, 1, 1, 1]);
        // More parts than units: some parts have nothing to do, none is out of range.
        let a = assign(&[5, 5], 8);
        assert!(a.iter().all(|&p| p < 8) && a[0] < a[1], "{a:?}");
        assert_eq!(assign(&[0, 0, 0], 3), [0, 1, 2]);
        assert!(assign(&[], 3).is_empty());
        // Never decreasing: the runs are contiguous.
        let weights: Vec<u64> = (0..50).map(|i| (i * 7919 % 97) as u64).collect();
        let parts = assign(&weights, 7);
        assert!(parts.windows(2).all(|w| w[0] <= w[1]), "{parts:?}");
        assert_eq!(*parts.last().unwrap(), 6);
    }

    #[test]
    fn coverage_names_the_unit_missing_or_doubled() {
        let assignment = assign(&[1, 1, 1, 1], 2);
        let head = |k: u32, done: Vec<u64>| PartHeader {
            format: "t-part-v1".into(),
            part: Part { index: k, count: 2 },
            listing: "x".into(),
            units: 4,
            done,
        };
        let (a, b) = (head(0, vec![0, 1]), head(1, vec![2, 3]));
        assert!(check_coverage(&[&a, &b], &assignment).is_ok());
        let short = head(1, vec![2]);
        assert!(
            check_coverage(&[&a, &short], &assignment)
                .unwrap_err()
                .contains("unit 3")
        );
        let wrong = head(1, vec![1, 2, 3]);
        assert!(
            check_coverage(&[&a, &wrong], &assignment)
                .unwrap_err()
                .contains("belongs to part 0")
        );
    }
}
