//! mf-hash: read a run manifest (YAML or JSON), lint it, and hash its canonical form.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use runfn_core::canonical::sorted_keys;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::parts::{Part, PartArgs, read_partials, write_partial};
use runfn_core::record::read_text;
use runfn_core::{Exit, InputError, Record};
use runfn_manifest::digest::{
    DataDigest, DigestError, DigestPart, Listing, digest_files, digest_path, total_bytes,
};
use runfn_manifest::hash::is_hash;
use runfn_manifest::pin::{replace_snapshot, verify, verify_digested, write_listing};
use runfn_manifest::snapshot::SnapshotRef;
use runfn_manifest::{
    FORMAT_TAG, Format, Pinning, Problem, lint, lint_as, manifest_hash, parse_manifest,
};
use runfn_schema::record::{HashCheck, MfHash, Pin};
use serde_json::{Value, json};

const AFTER_HELP: &str = "\
Examples:
  mf-hash manifest.yaml > runs/churn/record.json
  mf-hash manifest.yaml --check 3f1c...e9 -q            # exit 1 when the manifest changed
  mf-hash manifest.yaml --commit-from-git --data-digest ./lake/churn | ds-validate
  mf-hash manifest.yaml --print snapshot                 # the snapshot's path, one plain line
  mf-hash stops.yaml --lint                              # a template, its snapshot not yet pinned
  mf-hash weather.yaml --drift-only | ds-validate       # data and validate only: no training
  mf-hash pin manifest.yaml --snapshot ./lake/churn-2026-12-01 --out pinned.yaml
  mf-hash m.yaml --data-digest lake/churn --part $JOB_COMPLETION_INDEX/8 --parts parts/
  mf-hash m.yaml --data-digest lake/churn --parts parts/ | ds-validate   # the 8 parts merged

--data-digest verifies a snapshot the manifest pins (`@blake3:<hex>`): one that moved is refused
(exit 2) naming the file added, removed or changed, from the listing `pin` left beside it.
`pin` digests the snapshot (--snapshot, else the manifest's), writes its listing
`<snapshot>.pin.json` and the manifest with data.snapshot set to `<snapshot>@blake3:<hex>`,
every other byte unchanged (--out, else the manifest in place), and prints
{\"pin\": {\"manifest\", \"snapshot\", \"listing\", \"data_digest\": {path, digest, files, bytes}}}.

--part K/N --parts DIR hashes part K (0-based) of N of the snapshot's files (contiguous runs of
the sorted listing, balanced by bytes), writes their hashes to DIR/mf-hash.part-K-of-N.json and
prints {\"part\": {tool, part, partial, units, of}}. The same command with --parts DIR and no
--part merges them: the digest one process computes, bit for bit, checked against the pinned id;
a missing part, or a snapshot that changed since the parts ran, is refused (exit 2). A part of
a store URL (s3://bucket/prefix) reads only its own objects, as streams hashed as they arrive:
nothing is staged, no local disk is needed. docs/parts.md.

--lint checks a manifest without hashing it, as a template that `pin` completes each night:
its data.snapshot may lack the immutable id (`./lake/tonight`); every other rule applies. It
prints {\"lint\": {\"passed\": true, \"manifest\", \"pinned\": bool}} and exits 0, or 2 naming the
first problem.

Output (one JSON object on stdout):
  {\"manifest\": {...normalized, keys sorted...},
   \"manifest_hash\": \"<64 hex>\",            blake3 of \"runfn-manifest-v1\\n\" + RFC 8785 JSON
   \"mf_hash\": {\"passed\": bool, \"format\": \"runfn-manifest-v1\",
               \"problems\": [{\"field\": \"code.image\", \"message\": \"...\"}],
               \"check\": {\"expected\": \"<hex>\", \"matched\": bool},          with --check
               \"data_digest\": {\"path\", \"digest\": \"blake3:<hex>\", \"files\", \"bytes\"}},  with --data-digest
   \"timings\": [{\"tool\": \"mf-hash\", \"started_at\", \"wall_s\", \"cpu_s\", \"max_rss_bytes\",
                \"environment\": {\"cpu_model\", \"cores_online\", \"cores_available\", \"memory_bytes\",
                                \"kernel\", \"os\", \"version\"},
                \"cost\": {\"cpu\", \"gpu\", \"total\", \"currency\"}}]}     with manifest.cost

Exit: 0 clean, 1 --check mismatch (record still on stdout), 2 bad usage or input: a lint problem (an
unknown or misspelt field, a wrong type or value; each named on stderr, nothing on stdout).";

/// Lint a run manifest and hash its canonical form.
#[derive(Debug, Parser)]
#[command(name = "mf-hash", version, after_help = AFTER_HELP, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// The manifest, YAML or JSON (`-` or nothing: stdin).
    manifest: Option<PathBuf>,
    /// Input format (default: from the extension, else JSON when it starts with `{`).
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Exit 1 unless the manifest hashes to HASH.
    #[arg(long, value_name = "HASH")]
    check: Option<String>,
    /// Set code.commit to the git HEAD of the current folder; refuse a dirty work tree.
    #[arg(long)]
    commit_from_git: bool,
    /// Add a content digest of this data snapshot (folder, file or store URL such as
    /// s3://bucket/prefix); verified against a `@blake3:` snapshot id.
    #[arg(long, value_name = "PATH")]
    data_digest: Option<PathBuf>,
    /// Print one field of the manifest as a plain line instead of the record: `snapshot` (the
    /// path part of data.snapshot, as the data tools read it) or `alert` (empty when unset).
    #[arg(long, value_enum, value_name = "FIELD", conflicts_with_all = ["check", "data_digest", "commit_from_git"])]
    print: Option<PrintField>,
    /// Lint only, as a template: the snapshot may be one `pin` fills in (no immutable id yet).
    #[arg(long, conflicts_with_all = ["check", "data_digest", "commit_from_git", "print"])]
    lint: bool,
    /// A manifest for drift checks alone (ds-validate): `data` and `validate` suffice; code,
    /// seed, label and splits are checked only where present.
    #[arg(long)]
    drift_only: bool,
    #[command(flatten)]
    parts: PartArgs,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pin a snapshot: write the manifest with data.snapshot = <snapshot>@blake3:<digest>.
    Pin {
        /// The manifest to pin, YAML or JSON.
        manifest: PathBuf,
        /// The snapshot to pin, a folder or file (default: the manifest's data.snapshot).
        #[arg(long, value_name = "PATH")]
        snapshot: Option<PathBuf>,
        /// Where to write the pinned manifest, its folder made if missing (default: over
        /// MANIFEST, atomically).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PrintField {
    Snapshot,
    Alert,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FormatArg {
    Json,
    Yaml,
}

/// `--lint`: the manifest's problems as a template (its snapshot may await `pin`).
fn lint_template(fields: &serde_json::Map<String, Value>, origin: &str) -> anyhow::Result<Exit> {
    let problems = lint_as(fields, Pinning::Template);
    if let Some(first) = problems.first() {
        return Err(
            InputError::field(format!("{origin}: {}", first.field), first.message.clone()).into(),
        );
    }
    let pinned = lint(fields).is_empty();
    let line = json!({"lint": {"passed": true, "manifest": origin, "pinned": pinned}});
    runfn_core::cli::write_stdout(format!("{line}\n").as_bytes())?;
    Ok(Exit::Passed)
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("mf-hash", runfn_version::long());
    runfn_core::cli::main("mf-hash", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    if let Some(Command::Pin {
        manifest,
        snapshot,
        out,
    }) = &args.command
    {
        return pin(tool, manifest, snapshot.as_deref(), out.as_deref());
    }
    if let Some(expected) = &args.check
        && !is_hash(expected)
    {
        return Err(InputError::field(
            "--check",
            format!("`{expected}` is not 64 lowercase hex characters"),
        )
        .into());
    }
    let (text, origin) = read_text(args.manifest.as_deref())?;
    let format = match (
        args.format,
        args.manifest.as_deref().and_then(Format::from_extension),
    ) {
        (Some(FormatArg::Json), _) => Format::Json,
        (Some(FormatArg::Yaml), _) => Format::Yaml,
        (None, Some(format)) => format,
        (None, None) => Format::sniff(&text),
    };
    let mut manifest = parse_manifest(&text, format, &origin)?;
    if let Some(field) = args.print {
        let line = format!("{}\n", print_field(&manifest, field, &origin)?);
        runfn_core::cli::write_stdout(line.as_bytes())?;
        return Ok(Exit::Passed);
    }
    if args.commit_from_git {
        let commit = runfn_manifest::git::clean_head_commit(".".as_ref())?;
        set_commit(&mut manifest, commit, &origin)?;
    }
    let fields = manifest.as_object().context("the manifest is a mapping")?;
    if args.lint && !args.drift_only {
        return lint_template(fields, &origin);
    }
    let mut problems = if args.drift_only {
        runfn_manifest::lint_drift_only(fields)
    } else {
        lint(fields)
    };
    if args.lint {
        if let Some(first) = problems.first() {
            return Err(InputError::field(
                format!("{origin}: {}", first.field),
                first.message.clone(),
            )
            .into());
        }
        let line = json!({"lint": {"passed": true, "manifest": origin, "drift_only": true}});
        runfn_core::cli::write_stdout(
            format!(
                "{line}
"
            )
            .as_bytes(),
        )?;
        return Ok(Exit::Passed);
    }
    let hash = match manifest_hash(&manifest) {
        Ok(hash) => Some(hash),
        Err(err) => {
            problems.push(Problem {
                field: err.path.trim_start_matches("$.").to_string(),
                message: err.to_string(),
            });
            None
        }
    };

    // A manifest the tools cannot read as written is bad input, exit 2 before any data is
    // read: each problem on its own line, the first named in the error.
    if let Some(first) = problems.first() {
        for problem in &problems {
            tool.info(format_args!("problem: {problem}"));
        }
        let more = match problems.len() {
            1 => String::new(),
            n => format!(
                " ({} more problem{} above)",
                n - 1,
                if n == 2 { "" } else { "s" }
            ),
        };
        return Err(InputError::field(
            format!("{origin}: {}", first.field),
            format!("{}{more}", first.message),
        )
        .into());
    }

    let mut section = MfHash {
        passed: true,
        format: FORMAT_TAG.to_string(),
        problems: Vec::new(),
        check: None,
        data_digest: None,
    };
    if let Some(expected) = &args.check {
        let matched = hash.as_deref() == Some(expected.as_str());
        if !matched {
            problems.push(Problem {
                field: "manifest_hash".into(),
                message: format!(
                    "is {}, expected {expected} (--check)",
                    hash.as_deref().unwrap_or("not computable")
                ),
            });
        }
        section.check = Some(HashCheck {
            expected: expected.clone(),
            matched,
        });
    }
    if args.parts.parts.is_some() && args.data_digest.is_none() {
        return Err(InputError::field("--parts", "cuts --data-digest's work: give it too").into());
    }
    if let (Some(path), Some(part), Some(dir)) =
        (&args.data_digest, args.parts.part, &args.parts.parts)
    {
        return digest_part(tool, path, part, dir);
    }
    if let Some(path) = &args.data_digest {
        let pinned = pinned_digest(fields);
        section.data_digest = Some(match &args.parts.parts {
            Some(dir) => digest_from_parts(tool, path, dir, pinned)?,
            None => digest_with_progress(tool, path, pinned)?,
        });
    }
    for problem in &problems {
        tool.info(format_args!("problem: {problem}"));
    }
    let passed = problems.is_empty();
    section.passed = passed;
    section.problems = problems;

    let mut record = Record::new();
    record.set_section("manifest", sorted_keys(&manifest));
    record.set_section("manifest_hash", hash.map_or(Value::Null, Value::String));
    record.set(&section)?;
    tool.finish(record, Exit::from_passed(passed))
}

fn set_commit(manifest: &mut Value, commit: String, origin: &str) -> Result<(), InputError> {
    let code = manifest
        .as_object_mut()
        .map(|fields| fields.entry("code").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .ok_or_else(|| {
            InputError::field(
                format!("{origin}: code"),
                "must be a mapping to take --commit-from-git",
            )
        })?;
    code.insert("commit".into(), Value::String(commit));
    Ok(())
}

fn format_of(text: &str, path: &Path) -> Format {
    Format::from_extension(path).unwrap_or_else(|| Format::sniff(text))
}

/// The `blake3:<hex>` that `data.snapshot` pins, when it pins one.
fn pinned_digest(manifest: &serde_json::Map<String, Value>) -> Option<String> {
    let snapshot = manifest.get("data")?.get("snapshot")?.as_str()?;
    Some(
        SnapshotRef::parse(snapshot)
            .ok()?
            .content_digest()?
            .to_string(),
    )
}

/// Digests the snapshot at `path`; a pinned one must still hash to its pin.
fn digest_with_progress(
    tool: &Tool,
    path: &Path,
    pinned: Option<String>,
) -> anyhow::Result<DataDigest> {
    let in_flag = |e: DigestError| anyhow::anyhow!("--data-digest {e}");
    // A store URL is staged into the local cache (unchanged objects are not fetched again) and
    // that copy digested; the record names the URL.
    let url = path
        .to_str()
        .filter(|t| runfn_storage::is_remote(t))
        .map(String::from);
    let staged;
    let path = match &url {
        Some(url) => {
            tool.info(format!("{url}: staging into the local cache"));
            staged = runfn_storage::stage_prefix(url)?;
            staged.as_path()
        }
        None => path,
    };
    let bar = tool.progress_bar(
        total_bytes(path).map_err(in_flag)?,
        "{bytes}/{total_bytes} {binary_bytes_per_sec}",
    );
    let progress = |bytes| bar.inc(bytes);
    let mut digest = match &pinned {
        Some(pinned) => verify(path, pinned, &progress)
            .map_err(|e| InputError::field("data.snapshot", e.to_string()))?,
        None => digest_path(path, &progress).map_err(in_flag)?,
    };
    bar.finish_and_clear();
    if let Some(url) = url {
        digest.path = url;
    }
    tool.info(format!(
        "{}: {} ({} files, {} bytes{})",
        digest.path,
        digest.digest,
        digest.files,
        digest.bytes,
        if pinned.is_some() { ", as pinned" } else { "" }
    ));
    Ok(digest)
}

/// `--part K/N --parts DIR`: hashes this part's files of the snapshot and writes the partial.
fn digest_part(tool: &Tool, path: &Path, part: Part, dir: &Path) -> anyhow::Result<Exit> {
    let in_flag = |e: DigestError| anyhow::anyhow!("--data-digest {e}");
    if let Some(url) = store_url(path) {
        return digest_part_of_store(tool, url, part, dir);
    }
    let listing = Listing::of(path).map_err(in_flag)?;
    let partial = listing.digest_part(part, &|_| {}).map_err(in_flag)?;
    let units = (partial.files.len() as u64, partial.part.units);
    let done = write_partial(dir, "mf-hash", part, &partial, units)?;
    let bytes: u64 = partial.files.iter().map(|f| f.bytes).sum();
    tool.info(format!(
        "part {part}: hashed {} of {} files ({bytes} bytes) into {}",
        units.0, units.1, done.partial
    ));
    runfn_core::cli::write_stdout(done.line().as_bytes())?;
    Ok(Exit::Passed)
}

/// A part of a snapshot in a store: its objects are read from the store as streams and hashed
/// as they arrive, nothing staged, so a part fetches its share of the bytes and no more, and
/// needs no local disk for them.
fn digest_part_of_store(tool: &Tool, url: &str, part: Part, dir: &Path) -> anyhow::Result<Exit> {
    let listing = store_listing(url)?;
    let remote = runfn_storage::Remote::parse(url)?;
    let mut fetched = 0u64;
    let mut hashes = Vec::new();
    for (relative, size) in listing.part_files(part) {
        let object = remote.join(relative);
        let mut hasher = blake3::Hasher::new();
        let read = object.read_stream(&mut |chunk| {
            hasher.update(chunk);
        })?;
        if read != size {
            return Err(InputError::field(
                "--data-digest",
                format!(
                    "{}: {read} bytes read where the listing had {size}: it changed while the part ran",
                    object.url()
                ),
            )
            .into());
        }
        fetched += read;
        hashes.push(hasher.finalize());
    }
    let partial = listing.digest_part_from(part, hashes);
    let units = (partial.files.len() as u64, partial.part.units);
    let done = write_partial(dir, "mf-hash", part, &partial, units)?;
    tool.info(format!(
        "part {part}: hashed {} of {} files of {url}, {fetched} bytes read from the store (nothing staged), into {}",
        units.0, units.1, done.partial
    ));
    runfn_core::cli::write_stdout(done.line().as_bytes())?;
    Ok(Exit::Passed)
}

/// The objects under a store prefix as the listing of its staged copy would be.
fn store_listing(url: &str) -> anyhow::Result<Listing> {
    let remote = runfn_storage::Remote::parse(url)?;
    let objects = remote.list()?;
    if objects.is_empty() {
        return Err(InputError::field(
            "--data-digest",
            format!(
                "{url}: no objects under this prefix (a single object is digested by one process, without --part)"
            ),
        )
        .into());
    }
    Ok(Listing::of_store(
        url,
        objects.into_iter().map(|o| (o.relative, o.size)),
    ))
}

fn store_url(path: &Path) -> Option<&str> {
    path.to_str().filter(|t| runfn_storage::is_remote(t))
}

/// `--parts DIR` without `--part`: the digest from every part's hashes, checked against the
/// snapshot's listing now (and its pin): the digest one process would have computed.
fn digest_from_parts(
    tool: &Tool,
    path: &Path,
    dir: &Path,
    pinned: Option<String>,
) -> anyhow::Result<DataDigest> {
    let listing = match store_url(path) {
        Some(url) => store_listing(url)?,
        None => Listing::of(path).map_err(|e| anyhow::anyhow!("--data-digest {e}"))?,
    };
    let parts = read_partials(
        dir,
        "mf-hash",
        |text, origin| {
            serde_json::from_str::<DigestPart>(text)
                .map_err(|e| InputError::field(origin, format!("not an mf-hash partial: {e}")))
        },
        |p: &DigestPart| &p.part,
    )?;
    let digested = listing
        .digest_from_parts(&parts)
        .map_err(|m| InputError::field(dir.display().to_string(), m))?;
    let mut digest = match &pinned {
        Some(pinned) => verify_digested(path, pinned, digested)
            .map_err(|e| InputError::field("data.snapshot", e.to_string()))?,
        None => digested.0,
    };
    if let Some(url) = store_url(path) {
        // As one process names a store's snapshot: by the URL given.
        digest.path = url.to_string();
    }
    tool.info(format!(
        "{}: {} ({} files, {} bytes, merged from {} parts{})",
        digest.path,
        digest.digest,
        digest.files,
        digest.bytes,
        parts.len(),
        if pinned.is_some() { ", as pinned" } else { "" }
    ));
    Ok(digest)
}

fn print_field(manifest: &Value, field: PrintField, origin: &str) -> Result<String, InputError> {
    match field {
        PrintField::Snapshot => {
            let text = manifest
                .pointer("/data/snapshot")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    InputError::field(format!("{origin}: data.snapshot"), "is missing")
                })?;
            let reference = SnapshotRef::parse(text)
                .map_err(|reason| InputError::field(format!("{origin}: data.snapshot"), reason))?;
            Ok(reference.location.to_string())
        }
        PrintField::Alert => match manifest.get("alert") {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(command)) if !command.contains('\n') => Ok(command.clone()),
            Some(_) => Err(InputError::field(
                format!("{origin}: alert"),
                "must be a one-line string (a shell command)",
            )),
        },
    }
}

/// `mf-hash pin`: everything is read and checked before the listing, then the manifest, is written.
fn pin(
    tool: &Tool,
    manifest_path: &Path,
    snapshot: Option<&Path>,
    out: Option<&Path>,
) -> anyhow::Result<Exit> {
    let (text, origin) = read_text(Some(manifest_path))?;
    let format = format_of(&text, manifest_path);
    let manifest = parse_manifest(&text, format, &origin)?;
    let current = manifest
        .pointer("/data/snapshot")
        .and_then(Value::as_str)
        .ok_or_else(|| InputError::field(format!("{origin}: data.snapshot"), "is missing"))?;
    let location = match snapshot {
        Some(path) => path
            .to_str()
            .ok_or_else(|| InputError::field("--snapshot", "is not valid UTF-8"))?
            .to_string(),
        None => current
            .rsplit_once('@')
            .map_or(current, |(location, _)| location)
            .to_string(),
    };
    let root = Path::new(&location);
    let (digest, files) = digest_files(root, &|_| {}).map_err(|e| {
        let field = if snapshot.is_some() {
            "--snapshot"
        } else {
            "data.snapshot"
        };
        InputError::field(field, e.to_string())
    })?;
    let value = format!("{location}@{}", digest.digest);
    let pinned_text = replace_snapshot(&text, format, &value)
        .map_err(|message| InputError::field(&origin, message))?;
    let target = out.unwrap_or(manifest_path);
    // `--out runs/stops/tonight.yaml` on the first night: the folder is made, as --out folders are.
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        runfn_core::paths::create_dir_all(parent)?;
    }
    // The listing is written once the manifest's temp file exists: an --out that cannot be
    // written fails before anything is, instead of leaving a listing beside the snapshot.
    let mut listing = None;
    let written = runfn_core::atomic::write_atomic(target, |writer| {
        listing = Some(write_listing(root, &digest, files));
        match &listing {
            Some(Ok(_)) => writer.write_all(pinned_text.as_bytes()),
            _ => Err(std::io::Error::other("the listing was not written")),
        }
    });
    let listing = match (listing, written) {
        (Some(Err(err)), _) => return Err(err.into()),
        (_, Err(err)) => return Err(err.into()),
        (Some(Ok(listing)), Ok(())) => listing,
        (None, Ok(())) => anyhow::bail!("{}: written without its listing", target.display()),
    };
    tool.info(format!(
        "pinned {value} in {} (listing {})",
        target.display(),
        listing.display()
    ));
    let mut record = Record::new();
    record.set(&Pin {
        manifest: target.display().to_string(),
        snapshot: value,
        listing: listing.display().to_string(),
        data_digest: digest,
    })?;
    tool.finish(record, Exit::Passed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
