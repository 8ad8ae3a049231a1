//! `--part K/N --parts DIR` (read part K's files into DIR), `--reduce R/M --parts DIR` (write
//! reducer R's run of the shards) and `--parts DIR` alone (the merge: check and index them).
//! The shards, the index and the record are one process's, byte for byte.

use std::collections::BTreeMap;
use std::path::Path;

use runfn_core::cli::Tool;
use runfn_core::parts::{Part, PartDone};
use runfn_core::{Exit, InputError};
use runfn_data::shards::{Mapped, ShardIndex, merge_parts, reduce};
use runfn_data::spec::DataSpec;
use runfn_schema::record::ResolvedSplit;

/// The flags that decide the shards' bytes: a reducer or merge given others than the parts
/// were run with is refused by name.
pub struct Writing {
    pub shard_rows: u64,
    pub row_group_rows: u64,
    pub zstd_level: i32,
    pub memory: u64,
}

/// Parts read a local or shared folder and write to one: a store URL is written by one
/// process (which stages and publishes).
pub fn refuse_store_urls(
    input: Option<&Path>,
    manifest_snapshot: Option<&str>,
    out: &Path,
) -> Result<(), InputError> {
    let remote = |path: &Path| path.to_str().is_some_and(runfn_storage::is_remote);
    let refused = if input.is_some_and(remote) {
        Some("--in")
    } else if input.is_none() && manifest_snapshot.is_some_and(runfn_storage::is_remote) {
        Some("manifest.data.snapshot")
    } else if remote(out) {
        Some("--out")
    } else {
        None
    };
    match refused {
        Some(field) => Err(InputError::field(
            field,
            "is a store URL: parts read and write a folder every machine sees (a shared file system); a store is read or written by one process",
        )),
        None => Ok(()),
    }
}

/// What a part or reducer prints: where its partial went.
pub fn print_done(tool: &Tool, done: &PartDone) -> anyhow::Result<Exit> {
    tool.info(format!(
        "{} {}: {} of {} units, partial {}",
        done.tool, done.part, done.units, done.of, done.partial
    ));
    runfn_core::cli::write_stdout(done.line().as_bytes())?;
    Ok(Exit::Passed)
}

/// The parts in `dir`, refused where they were run with other writing flags than `writing`.
fn mapped(dir: &Path, writing: &Writing) -> anyhow::Result<Mapped> {
    let mapped = Mapped::read(dir)?;
    let settings = &mapped.settings;
    for (flag, given, parts) in [
        ("--shard-rows", writing.shard_rows, settings.shard_rows),
        (
            "--row-group-rows",
            writing.row_group_rows,
            settings.row_group_rows,
        ),
        (
            "--zstd-level",
            writing.zstd_level as u64,
            settings.zstd_level as u64,
        ),
    ] {
        if given != parts {
            return Err(InputError::field(
                flag,
                format!(
                    "is {given}, but the parts in {} were run with {parts}: give every part, reducer and the merge the same flags",
                    dir.display()
                ),
            )
            .into());
        }
    }
    Ok(mapped)
}

/// Reducer `reducer`: its shards into `out`, its partial into `dir`.
pub fn run_reducer(
    tool: &Tool,
    writing: &Writing,
    dir: &Path,
    out: &Path,
    reducer: Part,
) -> anyhow::Result<Exit> {
    let mapped = mapped(dir, writing)?;
    let done = reduce(&mapped, out, reducer, writing.memory)?;
    print_done(tool, &done)
}

/// The merge: the index of the reducers' shards (or of this process's reduction, when no
/// reducer ran), after checking the snapshot the parts read against the manifest's pin or
/// mf-hash's digest, the seed and the splits against the parts'.
pub fn run_merge(
    tool: &Tool,
    writing: &Writing,
    run: &MergeRun,
) -> anyhow::Result<(ShardIndex, String, BTreeMap<String, ResolvedSplit>)> {
    let mapped = mapped(run.dir, writing)?;
    let settings = &mapped.settings;
    if settings.seed != run.seed {
        return Err(InputError::field(
            "--seed",
            format!(
                "is {}, but the parts were run with seed {}",
                run.seed, settings.seed
            ),
        )
        .into());
    }
    let parts_rules: Vec<(String, String)> = settings
        .splits
        .iter()
        .map(|s| (s.name.clone(), s.rule.clone()))
        .collect();
    if parts_rules != run.rules {
        return Err(InputError::field(
            "manifest.data.splits",
            "differ from the splits the parts were run with (--split flags count too)",
        )
        .into());
    }
    let (index, blake3) = merge_parts(&mapped, run.out, run.input, writing.memory, &|digested| {
        run.spec.verify_digested(run.input, digested)
    })?;
    for (name, split) in &index.splits {
        tool.info(format!(
            "{name}: merged {} shards of {} parts",
            split.shards.len(),
            mapped.parts.len()
        ));
    }
    let resolved = mapped.settings.resolved.iter().cloned().collect();
    Ok((index, blake3, resolved))
}

/// What the merge is given besides the parts.
pub struct MergeRun<'a> {
    pub dir: &'a Path,
    pub out: &'a Path,
    /// The snapshot: listed for its digest, not read.
    pub input: &'a Path,
    pub spec: &'a DataSpec,
    pub seed: u64,
    pub rules: Vec<(String, String)>,
}
